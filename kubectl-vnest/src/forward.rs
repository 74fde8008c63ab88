//! `connect --port-forward`: a local loopback port forwarded to the syncer's API proxy in
//! the virtual cluster's pod, one port-forward stream per local connection.

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use tokio::net::{TcpListener, TcpStream};

/// The syncer proxy's port in the pod (`vc-<name>` kubeconfigs point at it through the Service).
pub const PROXY_PORT: u16 = 8443;

/// The pod serving the proxy: replica 0 of StatefulSet `<name>`.
pub fn proxy_pod(name: &str) -> String {
    format!("{name}-0")
}

/// Forwards connections accepted on `listener` to `pod`'s proxy port until Ctrl+C.
pub async fn serve(pods: Api<Pod>, pod: String, listener: TcpListener) -> Result<()> {
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (connection, _) = accepted.context("accepting a local connection")?;
                let (pods, pod) = (pods.clone(), pod.clone());
                tokio::spawn(async move {
                    if let Err(e) = forward(&pods, &pod, connection).await {
                        eprintln!("port-forward to {pod}: {e:#}");
                    }
                });
            }
            _ = tokio::signal::ctrl_c() => return Ok(()),
        }
    }
}

async fn forward(pods: &Api<Pod>, pod: &str, mut connection: TcpStream) -> Result<()> {
    let mut forwarder = pods
        .portforward(pod, &[PROXY_PORT])
        .await
        .with_context(|| format!("port-forward to pod {pod}"))?;
    let mut upstream = forwarder
        .take_stream(PROXY_PORT)
        .context("the port-forward opened no stream")?;
    tokio::io::copy_bidirectional(&mut connection, &mut upstream).await?;
    drop(upstream);
    forwarder.join().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_proxy_runs_in_replica_zero() {
        assert_eq!(super::proxy_pod("team-a"), "team-a-0");
    }
}
