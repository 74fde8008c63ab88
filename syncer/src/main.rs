//! `vnest-syncer`: runs beside a virtual control plane and syncs its objects with the host
//! namespace. Flags default to how the StatefulSet wires it; tests override them to run it
//! as a plain process.

use std::{
    io::IsTerminal,
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::{Arc, Mutex, atomic::AtomicUsize},
};

use anyhow::Context as _;
use clap::Parser;
use kube::{
    Client, Config,
    config::{AuthInfo, KubeConfigOptions, Kubeconfig},
    runtime::events::{Recorder, Reporter},
};
use vnest_crds::SyncerConfig;
use vnest_syncer::{
    controllers, custom, engine::Ctx, host_client, metrics::Metrics, proxy, server,
    translate::Target,
};

/// Syncs a virtual cluster's workloads into its host namespace.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// The `config.yaml` of Secret `vc-config-<name>`.
    #[arg(
        long,
        env = "VNEST_SYNCER_CONFIG",
        default_value = "/etc/vnest/config/config.yaml"
    )]
    config: PathBuf,
    /// Kubeconfig of the host cluster; in-cluster config (the pod's ServiceAccount) when absent.
    #[arg(long, env = "VNEST_HOST_KUBECONFIG")]
    host_kubeconfig: Option<PathBuf>,
    /// Admin kubeconfig of the virtual API server (k3s writes it on the shared data volume).
    #[arg(
        long,
        env = "VNEST_VIRTUAL_KUBECONFIG",
        default_value = "/data/k3s-config/kube-config.yaml"
    )]
    virtual_kubeconfig: PathBuf,
    /// The VirtualCluster's name; the config's when absent.
    #[arg(long)]
    name: Option<String>,
    /// The host namespace; the pod's (downward API), else the config's.
    #[arg(long, env = "POD_NAMESPACE")]
    host_namespace: Option<String>,
    /// Sync only these virtual namespaces (repeat, or comma-separated); all when absent.
    #[arg(long = "virtual-namespace", value_delimiter = ',')]
    virtual_namespaces: Vec<String>,
    /// Address of /metrics, /healthz and /readyz (loopback unless scraped from outside).
    #[arg(
        long,
        env = "VNEST_SYNCER_METRICS_ADDRESS",
        default_value = "127.0.0.1:8081"
    )]
    metrics_address: SocketAddr,
    /// Address of the API proxy the tenant's kubeconfig points at (the StatefulSet serves
    /// it on all of the pod's addresses, so the Service and port-forwarding both reach it).
    #[arg(
        long,
        env = "VNEST_SYNCER_PROXY_ADDRESS",
        default_value = "127.0.0.1:8443"
    )]
    proxy_address: SocketAddr,
    /// The mounted `<name>-certs` Secret: the proxy's serving certificate and the CA its
    /// client certificates are verified against.
    #[arg(long, default_value = "/etc/vnest/certs")]
    certs_dir: PathBuf,
    /// Unix socket the virtual API server's egress selector sends its kubelet traffic to
    /// (distro `k8s`); then exec, attach, port-forward and logs pass the virtual API server.
    /// Without it the proxy serves them from the host pod itself.
    #[arg(long, env = "VNEST_SYNCER_KUBELET_SOCKET")]
    kubelet_socket: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

/// What the binary does besides syncing.
#[derive(clap::Subcommand, Debug)]
enum Command {
    /// Writes the pod's `/etc/hosts` again naming it `--fqdn` (the init container of synced
    /// pods with a subdomain, `sync.toHost.pods.rewriteHosts`), then exits.
    RewriteHosts {
        #[arg(long)]
        hostname: String,
        #[arg(long)]
        fqdn: String,
        #[arg(long, default_value = "/etc/hosts")]
        from: PathBuf,
        #[arg(long)]
        to: PathBuf,
    },
}

fn rewrite_hosts(hostname: &str, fqdn: &str, from: &Path, to: &Path) -> anyhow::Result<()> {
    let hosts = std::fs::read_to_string(from)
        .with_context(|| format!("failed to read {}", from.display()))?;
    let rewritten = vnest_syncer::translate::pod::hosts::rewritten(&hosts, hostname, fqdn);
    std::fs::write(to, rewritten).with_context(|| format!("failed to write {}", to.display()))
}

async fn client_config(kubeconfig: Option<&Path>) -> anyhow::Result<Config> {
    Ok(match kubeconfig {
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path)
                .with_context(|| format!("failed to read {}", path.display()))?;
            Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?
        }
        None => Config::incluster().context("failed to load the in-cluster config")?,
    })
}

/// The proxy's clients: no retries of their own, and for the virtual API server one
/// without credentials that bearer tokens pass through.
fn upstreams(host: &Config, virt: &Config) -> anyhow::Result<proxy::Upstreams> {
    let once = |config: &Config| {
        let mut config = config.clone();
        config.default_retry = false;
        Client::try_from(config)
    };
    let mut anonymous = virt.clone();
    anonymous.auth_info = AuthInfo::default();
    Ok(proxy::Upstreams {
        admin: once(virt)?,
        anonymous: once(&anonymous)?,
        host: once(host)?,
    })
}

fn read_config(args: &Args) -> anyhow::Result<SyncerConfig> {
    let text = std::fs::read_to_string(&args.config)
        .with_context(|| format!("failed to read {}", args.config.display()))?;
    let mut config: SyncerConfig = serde_yaml::from_str(&text)
        .with_context(|| format!("failed to parse {}", args.config.display()))?;
    if let Some(name) = &args.name {
        config.name = name.clone();
    }
    if let Some(ns) = &args.host_namespace {
        config.host_namespace = ns.clone();
    }
    Ok(config)
}

/// Resolves the custom resources, retrying what may pass (RBAC not granted yet, an API
/// server restarting); `None` when one cannot resolve before the next start, which
/// `/readyz` then explains.
async fn resolve_custom_resources(ctx: &Ctx) -> Option<Vec<Arc<custom::Resolved>>> {
    let set_blocked = |why: Option<String>| *ctx.blocked.lock().expect("not poisoned") = why;
    loop {
        match custom::resolve_all(&ctx.host, &ctx.virt, &ctx.config.sync).await {
            Ok(resolved) => {
                set_blocked(None);
                return Some(resolved);
            }
            Err(e) if e.downcast_ref::<custom::Final>().is_some() => {
                let why =
                    format!("{e:#}; the syncer resolves custom resources again when it restarts");
                tracing::error!(error = %why, "not syncing");
                set_blocked(Some(why));
                return None;
            }
            Err(e) => {
                let why = format!("{e:#}; retrying in {}s", RESOLVE_RETRY.as_secs());
                tracing::warn!(error = %why, "custom resources not resolved yet");
                set_blocked(Some(why));
                tokio::time::sleep(RESOLVE_RETRY).await;
            }
        }
    }
}

/// How long a failed custom-resource resolution waits before trying again.
const RESOLVE_RETRY: std::time::Duration = std::time::Duration::from_secs(3);

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if let Some(Command::RewriteHosts {
        hostname,
        fqdn,
        from,
        to,
    }) = &args.command
    {
        return rewrite_hosts(hostname, fqdn, from, to);
    }
    let filter =
        tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let config = read_config(&args)?;
    let host_config = client_config(args.host_kubeconfig.as_deref()).await?;
    let virtual_config = client_config(Some(&args.virtual_kubeconfig)).await?;
    let upstreams = upstreams(&host_config, &virtual_config)?;
    let host = host_client::throttled(host_config, config.sync.host_rate_limit)?;
    let virt = Client::try_from(virtual_config)?;
    tracing::info!(vc = %config.name, host_namespace = %config.host_namespace, proxy = %args.proxy_address, "starting");
    let reporter = Reporter {
        controller: vnest_syncer::translate::event::REPORTER.into(),
        instance: std::env::var("POD_NAME").ok(),
    };
    let ctx = Arc::new(Ctx {
        recorder: Recorder::new(virt.clone(), reporter),
        host,
        virt,
        target: Target::new(&config.name, &config.host_namespace),
        config,
        virtual_namespaces: args.virtual_namespaces,
        metrics: Metrics::new(),
        unsynced: AtomicUsize::new(usize::MAX),
        blocked: Mutex::new(Some("resolving custom resources".into())),
        writing_through: Mutex::default(),
    });
    tokio::spawn({
        let ctx = ctx.clone();
        async move {
            if let Err(e) = server::serve(args.metrics_address, ctx).await {
                tracing::error!(error = format!("{e:#}"), "metrics server failed");
            }
        }
    });
    let custom = resolve_custom_resources(&ctx).await;
    let write_through = custom.iter().flatten().cloned().collect();
    let proxy = proxy::serve(
        args.proxy_address,
        &args.certs_dir,
        ctx.clone(),
        upstreams,
        write_through,
        args.kubelet_socket,
    );
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let sync = async move {
        match custom {
            Some(custom) => controllers::run(ctx, custom).await,
            // Serve /readyz with the reason until restarted.
            None => futures::future::pending::<anyhow::Result<()>>().await,
        }
    };
    tokio::select! {
        result = sync => {
            result?;
            anyhow::bail!("a sync engine stopped")
        }
        result = proxy => result.context("the API proxy stopped")?,
        _ = tokio::signal::ctrl_c() => tracing::info!("interrupted; stopping"),
        _ = terminate.recv() => tracing::info!("terminated; stopping"),
    }
    Ok(())
}
