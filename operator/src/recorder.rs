//! Publishing Events (`events.k8s.io/v1`) about VirtualClusters. Repeats fold into a series
//! as kube-runtime's `Recorder` folds them: an event with the same type, action, reason,
//! reporter, regarding and related object as one published less than 6 minutes before patches
//! that event's `series` instead of creating another. What differs is what is kept per series:
//! kube's `Recorder` holds a clone of the whole event and of its key for those 6 minutes,
//! about 2 KiB each (16 per VirtualCluster at creation, one per child, so over 30 MiB while a
//! thousand VirtualClusters are created); this keeps a 64-bit digest of the key, the event's
//! name and time, and the count.

use std::{
    collections::HashMap,
    hash::{DefaultHasher, Hash, Hasher},
    sync::Mutex,
};

use k8s_openapi::{
    api::{
        core::v1::ObjectReference,
        events::v1::{Event as K8sEvent, EventSeries},
    },
    apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta},
    jiff::{SignedDuration, Timestamp},
};
use kube::{
    Api, Client,
    api::{Patch, PatchParams, PostParams},
    runtime::events::{Event, EventType, Reporter},
};

/// How long a published event stays open to repeats (kube-runtime's and client-go's value).
const SERIES_TTL: SignedDuration = SignedDuration::from_mins(6);

/// Publishes events, folding repeats into series.
pub struct Recorder {
    client: Client,
    reporter: Reporter,
    series: Mutex<SeriesBook>,
}

/// The series published in the last [`SERIES_TTL`], by the digest of their key.
#[derive(Debug, Default)]
struct SeriesBook {
    open: HashMap<u64, Series>,
}

/// What patching a repeat needs of the event first published.
#[derive(Clone, Debug, PartialEq)]
struct Series {
    name: String,
    first: Timestamp,
    count: i32,
    last: Timestamp,
}

impl SeriesBook {
    /// The open series of `key` at `now`, after forgetting those last seen [`SERIES_TTL`] or
    /// more before `now`.
    fn open(&mut self, key: u64, now: Timestamp) -> Option<Series> {
        self.open.retain(|_, s| s.last + SERIES_TTL > now);
        self.open.get(&key).cloned()
    }

    /// Records that `series` was published (created or patched).
    fn published(&mut self, key: u64, series: Series) {
        self.open.insert(key, series);
    }
}

/// Digest of what makes two events the same series (kube-runtime's `EventKey`; the
/// references by API version, kind, name, namespace and uid).
fn series_key(reporter: &Reporter, event: &Event, regarding: &ObjectReference) -> u64 {
    let mut hasher = DefaultHasher::new();
    event.type_.hash(&mut hasher);
    event.action.hash(&mut hasher);
    event.reason.hash(&mut hasher);
    reporter.controller.hash(&mut hasher);
    reporter.instance.hash(&mut hasher);
    for reference in std::iter::once(Some(regarding)).chain([event.secondary.as_ref()]) {
        match reference {
            Some(r) => {
                true.hash(&mut hasher);
                (&r.api_version, &r.kind, &r.name, &r.namespace, &r.uid).hash(&mut hasher);
            }
            None => false.hash(&mut hasher),
        }
    }
    hasher.finish()
}

/// The Event object for `event` about `regarding`, first published as `name` at `first`,
/// with `series` when it is a repeat.
fn event_object(
    reporter: &Reporter,
    event: &Event,
    regarding: &ObjectReference,
    first: &Series,
    series: Option<EventSeries>,
) -> K8sEvent {
    K8sEvent {
        action: Some(event.action.clone()),
        reason: Some(event.reason.clone()),
        event_time: Some(MicroTime(first.first)),
        regarding: Some(regarding.clone()),
        related: event.secondary.clone(),
        note: event.note.clone(),
        metadata: ObjectMeta {
            namespace: regarding.namespace.clone(),
            name: Some(first.name.clone()),
            ..Default::default()
        },
        reporting_controller: Some(reporter.controller.clone()),
        reporting_instance: Some(
            reporter
                .instance
                .clone()
                .unwrap_or_else(|| reporter.controller.clone()),
        ),
        series,
        type_: Some(
            match event.type_ {
                EventType::Normal => "Normal",
                EventType::Warning => "Warning",
            }
            .into(),
        ),
        ..Default::default()
    }
}

impl Recorder {
    pub fn new(client: Client, reporter: Reporter) -> Self {
        Recorder {
            client,
            reporter,
            series: Mutex::default(),
        }
    }

    /// Creates the event in `regarding`'s namespace (`default` when cluster-scoped), or
    /// patches the series of the same event published less than 6 minutes ago.
    pub async fn publish(
        &self,
        event: &Event,
        regarding: &ObjectReference,
    ) -> Result<(), kube::Error> {
        let now = Timestamp::now();
        let key = series_key(&self.reporter, event, regarding);
        let open = self.series.lock().unwrap().open(key, now);
        let events: Api<K8sEvent> = Api::namespaced(
            self.client.clone(),
            regarding.namespace.as_deref().unwrap_or("default"),
        );
        let series = match open {
            Some(open) => {
                let series = Series {
                    count: open.count + 1,
                    last: now,
                    ..open
                };
                let repeat = EventSeries {
                    count: series.count,
                    last_observed_time: MicroTime(now),
                };
                let object = event_object(&self.reporter, event, regarding, &series, Some(repeat));
                events
                    .patch(
                        &series.name,
                        &PatchParams::default(),
                        &Patch::Merge(&object),
                    )
                    .await?;
                series
            }
            None => {
                let named = regarding.name.as_ref().unwrap_or(&self.reporter.controller);
                let series = Series {
                    name: format!("{named}.{:x}", now.as_nanosecond()),
                    first: now,
                    count: 1,
                    last: now,
                };
                let object = event_object(&self.reporter, event, regarding, &series, None);
                events.create(&PostParams::default(), &object).await?;
                series
            }
        };
        self.series.lock().unwrap().published(key, series);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reporter() -> Reporter {
        Reporter {
            controller: "vnest-operator".into(),
            instance: Some("pod-a".into()),
        }
    }

    fn vc(namespace: &str) -> ObjectReference {
        ObjectReference {
            api_version: Some("vnest.dev/v1alpha1".into()),
            kind: Some("VirtualCluster".into()),
            name: Some("vc".into()),
            namespace: Some(namespace.into()),
            uid: Some("uid-1".into()),
            ..Default::default()
        }
    }

    fn created(child: &str, note: &str) -> Event {
        Event {
            type_: EventType::Normal,
            reason: "Created".into(),
            note: Some(note.into()),
            action: "Apply".into(),
            secondary: Some(ObjectReference {
                kind: Some(child.into()),
                name: Some("vc".into()),
                ..Default::default()
            }),
        }
    }

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).unwrap()
    }

    fn series(name: &str, seconds: i64) -> Series {
        Series {
            name: name.into(),
            first: at(seconds),
            count: 1,
            last: at(seconds),
        }
    }

    /// The note is not part of the key (as in kube-runtime): a repeat with a new message
    /// still folds into the series, and anything else in the key starts a new one.
    #[test]
    fn a_series_is_the_same_type_reason_action_reporter_and_objects() {
        let key = |e: &Event, r: &ObjectReference| series_key(&reporter(), e, r);
        let first = key(&created("Service", "Created Service vc"), &vc("a"));
        assert_eq!(first, key(&created("Service", "other words"), &vc("a")));
        assert_ne!(
            first,
            key(&created("StatefulSet", "Created Service vc"), &vc("a"))
        );
        assert_ne!(
            first,
            key(&created("Service", "Created Service vc"), &vc("b"))
        );
        let mut warning = created("Service", "Created Service vc");
        warning.type_ = EventType::Warning;
        assert_ne!(first, key(&warning, &vc("a")));
        let mut uncommented = created("Service", "Created Service vc");
        uncommented.secondary = None;
        assert_ne!(first, key(&uncommented, &vc("a")));
        let other = Reporter {
            instance: Some("pod-b".into()),
            ..reporter()
        };
        let event = created("Service", "Created Service vc");
        assert_ne!(first, series_key(&other, &event, &vc("a")));
    }

    /// A repeat within 6 minutes of the last one finds its series; after that it is forgotten
    /// (and so is every other expired series, so the book does not grow without bound).
    #[test]
    fn series_stay_open_for_six_minutes_after_their_last_repeat() {
        let mut book = SeriesBook::default();
        book.published(1, series("vc.1", 0));
        book.published(2, series("vc.2", 0));
        let repeat = Series {
            count: 2,
            last: at(300),
            ..series("vc.1", 0)
        };
        assert_eq!(book.open(1, at(300)), Some(series("vc.1", 0)));
        book.published(1, repeat.clone());
        assert_eq!(book.open(1, at(659)), Some(repeat));
        assert_eq!(book.open.len(), 1, "series 2 expired at 360 s");
        assert_eq!(book.open(1, at(660)), None);
        assert!(book.open.is_empty());
    }

    /// A repeat patches the first event: same name and event time, the note of the repeat,
    /// and the series count.
    #[test]
    fn a_repeat_patches_the_first_event_with_its_series() {
        let first = Series {
            count: 3,
            last: at(90),
            ..series("vc.1", 0)
        };
        let repeat = EventSeries {
            count: 3,
            last_observed_time: MicroTime(at(90)),
        };
        let event = created("Service", "Created Service vc");
        let object = event_object(&reporter(), &event, &vc("a"), &first, Some(repeat.clone()));
        assert_eq!(object.metadata.name.as_deref(), Some("vc.1"));
        assert_eq!(object.metadata.namespace.as_deref(), Some("a"));
        assert_eq!(object.event_time, Some(MicroTime(at(0))));
        assert_eq!(object.series, Some(repeat));
        assert_eq!(object.note.as_deref(), Some("Created Service vc"));
        assert_eq!(object.type_.as_deref(), Some("Normal"));
        assert_eq!(object.reporting_instance.as_deref(), Some("pod-a"));
        assert_eq!(object.related, event.secondary);
    }
}
