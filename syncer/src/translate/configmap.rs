//! ConfigMaps: the host copy carries the data under the translated name.

use k8s_openapi::api::core::v1::ConfigMap;

use super::Target;

/// The host copy of virtual ConfigMap `virt`.
pub fn host_configmap(virt: &ConfigMap, target: &Target) -> ConfigMap {
    ConfigMap {
        metadata: target.host_meta("ConfigMap", &virt.metadata),
        data: virt.data.clone(),
        binary_data: virt.binary_data.clone(),
        immutable: virt.immutable,
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::*;

    /// Data, binary data and immutability reach the host unchanged under the new name.
    #[test]
    fn data_is_copied_under_the_host_name() {
        let virt: ConfigMap = from_yaml(
            "metadata: {name: settings, namespace: shop, uid: u}\ndata: {a: '1'}\nbinaryData: {b: AAE=}\nimmutable: true",
        );
        let host = host_configmap(&virt, &target());
        assert_eq!(host.metadata.name.as_deref(), Some("settings-x-shop-x-vc"));
        assert_eq!(host.data, virt.data);
        assert_eq!(host.binary_data, virt.binary_data);
        assert_eq!(host.immutable, Some(true));
    }
}
