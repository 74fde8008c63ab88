//! PodDisruptionBudgets: the host copy guards the host copies of the pods the virtual one
//! selects; the host's disruption status flows back.

use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetStatus};

use super::Target;
use vnest_crds::translate;

/// The host copy of virtual PodDisruptionBudget `virt`.
pub fn host_pdb(virt: &PodDisruptionBudget, target: &Target) -> PodDisruptionBudget {
    let namespace = virt.metadata.namespace.as_deref().unwrap_or_default();
    let mut spec = virt.spec.clone().unwrap_or_default();
    // No selector selects nothing; a translated one would select the whole namespace.
    spec.selector = spec
        .selector
        .map(|s| translate::host_label_selector(&s, namespace, &target.vc));
    PodDisruptionBudget {
        metadata: target.host_meta("PodDisruptionBudget", &virt.metadata),
        spec: Some(spec),
        status: None,
    }
}

/// The status the virtual budget should show, minus the host's generation.
pub fn virtual_status(host: &PodDisruptionBudget) -> Option<PodDisruptionBudgetStatus> {
    host.status.clone().map(|s| PodDisruptionBudgetStatus {
        observed_generation: None,
        ..s
    })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    use vnest_crds::meta::{LABEL_SYNCER_MANAGED_BY, LABEL_SYNCER_NAMESPACE};

    use super::super::test_support::*;
    use super::*;

    /// The budget counts only this virtual namespace's pods of this virtual cluster.
    #[test]
    fn the_selector_is_translated_and_the_budget_kept() {
        let virt: PodDisruptionBudget = from_yaml(
            "metadata: {name: web, namespace: shop}\nspec: {minAvailable: 2, selector: {matchLabels: {app: web}}}",
        );
        let host = host_pdb(&virt, &target());
        assert_eq!(host.metadata.name.as_deref(), Some("web-x-shop-x-vc"));
        let spec = host.spec.unwrap();
        assert_eq!(spec.min_available, Some(IntOrString::Int(2)));
        let labels = spec.selector.unwrap().match_labels.unwrap();
        assert_eq!(labels["app"], "web");
        assert_eq!(labels[LABEL_SYNCER_MANAGED_BY], "vc");
        assert_eq!(labels[LABEL_SYNCER_NAMESPACE], "shop");
    }

    /// A budget without a selector (which selects no pod) stays without one.
    #[test]
    fn a_budget_without_selector_stays_without() {
        let virt: PodDisruptionBudget =
            from_yaml("metadata: {name: web, namespace: shop}\nspec: {maxUnavailable: 1}");
        assert_eq!(host_pdb(&virt, &target()).spec.unwrap().selector, None);
    }

    /// Counts and conditions come back; the host's generation does not.
    #[test]
    fn status_comes_back_without_the_host_generation() {
        let host: PodDisruptionBudget = from_yaml(
            "metadata: {name: h}\nstatus: {currentHealthy: 2, desiredHealthy: 2, disruptionsAllowed: 0, expectedPods: 2, observedGeneration: 7}",
        );
        let status = virtual_status(&host).unwrap();
        assert_eq!(
            (status.current_healthy, status.disruptions_allowed),
            (Some(2), Some(0))
        );
        assert_eq!(status.observed_generation, None);
    }
}
