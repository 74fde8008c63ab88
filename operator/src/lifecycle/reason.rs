//! Why a virtual cluster sleeps, wakes or is deleted, spelled as the status, events and
//! metrics show them.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SleepReason {
    Paused,
    Schedule,
    Inactivity,
}

impl SleepReason {
    pub fn as_str(self) -> &'static str {
        match self {
            SleepReason::Paused => "Paused",
            SleepReason::Schedule => "Schedule",
            SleepReason::Inactivity => "Inactivity",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [Self::Paused, Self::Schedule, Self::Inactivity]
            .into_iter()
            .find(|r| r.as_str() == text)
    }
}

/// What ended a sleep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WakeReason {
    Schedule,
    Request,
    Resumed,
    SleepModeRemoved,
}

impl WakeReason {
    pub fn as_str(self) -> &'static str {
        match self {
            WakeReason::Schedule => "Schedule",
            WakeReason::Request => "Request",
            WakeReason::Resumed => "Resumed",
            WakeReason::SleepModeRemoved => "SleepModeRemoved",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeleteReason {
    AfterCreation,
    AfterInactivity,
}

impl DeleteReason {
    pub fn as_str(self) -> &'static str {
        match self {
            DeleteReason::AfterCreation => "AfterCreation",
            DeleteReason::AfterInactivity => "AfterInactivity",
        }
    }
}
