//! Ingresses: the host copy routes to the host copies of the virtual Services and serves the
//! host copies of the TLS Secrets; `ingressClassName` is kept (classes come from the host);
//! the load-balancer status flows back.

use k8s_openapi::api::networking::v1::{Ingress, IngressBackend, IngressSpec, IngressStatus};

use super::Target;

fn host_backend(backend: &mut IngressBackend, namespace: &str, target: &Target) {
    if let Some(service) = backend.service.as_mut() {
        service.name = target.host_name(&service.name, namespace);
    }
    if let Some(resource) = backend.resource.as_mut() {
        resource.name = target.host_name(&resource.name, namespace);
    }
}

/// The TLS Secrets virtual Ingress `ingress` serves (in its own namespace).
pub fn tls_secrets(ingress: &Ingress) -> Vec<String> {
    ingress
        .spec
        .iter()
        .flat_map(|s| s.tls.iter().flatten())
        .filter_map(|t| t.secret_name.clone())
        .collect()
}

/// The host copy of virtual Ingress `virt`.
pub fn host_ingress(virt: &Ingress, target: &Target) -> Ingress {
    let namespace = virt.metadata.namespace.as_deref().unwrap_or_default();
    let mut spec: IngressSpec = virt.spec.clone().unwrap_or_default();
    if let Some(backend) = spec.default_backend.as_mut() {
        host_backend(backend, namespace, target);
    }
    for path in spec
        .rules
        .iter_mut()
        .flatten()
        .filter_map(|r| r.http.as_mut())
        .flat_map(|h| h.paths.iter_mut())
    {
        host_backend(&mut path.backend, namespace, target);
    }
    for tls in spec.tls.iter_mut().flatten() {
        tls.secret_name = tls
            .secret_name
            .as_ref()
            .map(|n| target.host_name(n, namespace));
    }
    Ingress {
        metadata: target.host_meta("Ingress", &virt.metadata),
        spec: Some(spec),
        status: None,
    }
}

/// The status the virtual Ingress should show (load-balancer addresses): the host's.
pub fn virtual_status(host: &Ingress) -> Option<IngressStatus> {
    host.status.clone()
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::*;

    const INGRESS: &str = r#"
metadata: { name: my-app, namespace: shop, annotations: { alb.ingress.kubernetes.io/scheme: internet-facing } }
spec:
  ingressClassName: alb
  defaultBackend: { service: { name: fallback, port: { number: 80 } } }
  tls: [{ hosts: [myapp.example.com], secretName: myapp-tls }]
  rules:
  - host: myapp.example.com
    http:
      paths:
      - { path: /, pathType: Prefix, backend: { service: { name: my-app, port: { number: 80 } } } }
      - { path: /api, pathType: Prefix, backend: { service: { name: api, port: { name: http } } } }
"#;

    /// Every backend names the host copy of its Service; ports, hosts and class are kept.
    #[test]
    fn backends_route_to_host_services() {
        let host = host_ingress(&from_yaml(INGRESS), &target());
        assert_eq!(host.metadata.name.as_deref(), Some("my-app-x-shop-x-vc"));
        assert_eq!(
            host.metadata.annotations.as_ref().unwrap()["alb.ingress.kubernetes.io/scheme"],
            "internet-facing"
        );
        let spec = host.spec.unwrap();
        assert_eq!(spec.ingress_class_name.as_deref(), Some("alb"));
        let fallback = spec.default_backend.unwrap().service.unwrap();
        assert_eq!(fallback.name, "fallback-x-shop-x-vc");
        let rule = &spec.rules.unwrap()[0];
        assert_eq!(rule.host.as_deref(), Some("myapp.example.com"));
        let paths = &rule.http.as_ref().unwrap().paths;
        let names: Vec<_> = paths
            .iter()
            .map(|p| p.backend.service.as_ref().unwrap().name.as_str())
            .collect();
        assert_eq!(names, ["my-app-x-shop-x-vc", "api-x-shop-x-vc"]);
        let port = paths[1]
            .backend
            .service
            .as_ref()
            .unwrap()
            .port
            .as_ref()
            .unwrap();
        assert_eq!(port.name.as_deref(), Some("http"));
    }

    /// TLS serves the host copy of the virtual Secret, for the same hosts.
    #[test]
    fn tls_secrets_are_the_host_copies() {
        let virt: Ingress = from_yaml(INGRESS);
        assert_eq!(tls_secrets(&virt), ["myapp-tls"]);
        let tls = &host_ingress(&virt, &target()).spec.unwrap().tls.unwrap()[0];
        assert_eq!(tls.secret_name.as_deref(), Some("myapp-tls-x-shop-x-vc"));
        assert_eq!(tls.hosts.as_deref().unwrap(), ["myapp.example.com"]);
    }

    /// A TLS entry without a Secret (the controller's default certificate) stays without.
    #[test]
    fn tls_without_a_secret_stays_without() {
        let virt: Ingress =
            from_yaml("metadata: {name: a, namespace: shop}\nspec: {tls: [{hosts: [a.example]}]}");
        assert!(tls_secrets(&virt).is_empty());
        let tls = &host_ingress(&virt, &target()).spec.unwrap().tls.unwrap()[0];
        assert_eq!(tls.secret_name, None);
    }
}
