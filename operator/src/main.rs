use std::{
    net::{IpAddr, SocketAddr},
    time::Duration,
};

use anyhow::Context as _;
use clap::{Parser, ValueEnum};
use k8s_openapi::api::networking::v1::ServiceCIDR;
use kube::{
    Api, Client, Config,
    config::{KubeConfigOptions, Kubeconfig},
};
use tracing::info;
use vnest_crds::ServiceCidr;
use vnest_operator::{
    leader::LeaderElection,
    metrics::{self, Metrics, Readiness},
    reconcile,
    settings::{self, Images, Settings, WakeEndpoint},
    wake::listener::{self, Wake},
};

#[derive(Clone, Copy, Debug, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

/// Reconciles VirtualCluster objects into virtual control planes on this cluster.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// Kubeconfig to use; in-cluster config or $KUBECONFIG when absent.
    #[arg(long, env = "VNEST_KUBECONFIG")]
    kubeconfig: Option<std::path::PathBuf>,
    /// Namespaces to watch (repeat, or comma-separated); all namespaces when absent.
    #[arg(
        long = "namespace",
        env = "VNEST_WATCH_NAMESPACES",
        value_delimiter = ','
    )]
    namespaces: Vec<String>,
    /// Only VirtualClusters whose labels match this selector (e.g. `shard=a`), to split them
    /// between operator installations; all when absent.
    #[arg(long, env = "VNEST_SELECTOR")]
    selector: Option<String>,
    /// VirtualClusters reconciled at once, per watched namespace.
    #[arg(long, env = "VNEST_CONCURRENCY", default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..))]
    concurrency: u16,
    /// Let VirtualClusters add `rbac.*.extraRules` to their syncer's roles (refused with
    /// `SpecValid=False` otherwise): whoever may write a VirtualCluster then can grant its
    /// syncer any host right this operator holds or may escalate to.
    #[arg(long, env = "VNEST_ALLOW_EXTRA_RULES")]
    allow_extra_rules: bool,
    /// Address of /metrics, /healthz and /readyz.
    #[arg(long, env = "VNEST_METRICS_ADDRESS", default_value = "127.0.0.1:8080")]
    metrics_address: SocketAddr,
    #[arg(long, env = "VNEST_SYNCER_IMAGE")]
    syncer_image: Option<String>,
    #[arg(long, env = "VNEST_K3S_IMAGE")]
    k3s_image: Option<String>,
    #[arg(long, env = "VNEST_K0S_IMAGE")]
    k0s_image: Option<String>,
    /// Image with kube-apiserver, kube-controller-manager and kine (distro k8s).
    #[arg(long, env = "VNEST_KUBERNETES_IMAGE")]
    kubernetes_image: Option<String>,
    /// etcd image (distro k8s with `backingStore.etcd`).
    #[arg(long, env = "VNEST_ETCD_IMAGE")]
    etcd_image: Option<String>,
    #[arg(long, env = "VNEST_CLUSTER_DOMAIN", default_value = "cluster.local")]
    cluster_domain: String,
    /// Service range of every virtual API server (an `address/prefix` CIDR, checked here
    /// rather than by every virtual API server at start). Must contain the host cluster's
    /// Service CIDR: the syncer gives virtual Services the ClusterIPs of their host copies.
    #[arg(long, env = "VNEST_SERVICE_CIDR", default_value = settings::DEFAULT_SERVICE_CIDR)]
    service_cidr: ServiceCidr,
    /// The host cluster's DNS server, which `networking.resolveDNS` entries forward to.
    /// Default: the 10th address of `--service-cidr`, where kubeadm puts `kube-dns`.
    #[arg(long, env = "VNEST_HOST_DNS")]
    host_dns: Option<IpAddr>,
    /// Run without a Lease (a single replica only).
    #[arg(long, env = "VNEST_NO_LEADER_ELECTION")]
    no_leader_election: bool,
    #[arg(long, env = "POD_NAMESPACE", default_value = "vnest-system")]
    leader_election_namespace: String,
    #[arg(long, default_value = "vnest-operator")]
    leader_election_lease: String,
    /// How long a standby waits, after the Lease last changed, before it takes the lead.
    #[arg(long, default_value_t = 15, value_parser = clap::value_parser!(u64).range(3..))]
    leader_election_lease_seconds: u64,
    /// This replica's name in the Lease; the pod name in a cluster.
    #[arg(long, env = "POD_NAME")]
    identity: Option<String>,
    #[arg(long, env = "VNEST_LOG_FORMAT", value_enum, default_value = "text")]
    log_format: LogFormat,
    /// Address of the wake endpoint (TLS): with `sleepMode.autoWakeup`, a sleeping cluster's
    /// Service routes here and a connection wakes it. Absent: no wake endpoint, and Services
    /// always select the control-plane pod.
    #[arg(long, env = "VNEST_WAKE_ADDRESS", requires = "wake_advertise_ip")]
    wake_address: Option<SocketAddr>,
    /// IP the cluster reaches this operator at (its pod IP), written into the EndpointSlice of
    /// a sleeping cluster's Service; not loopback (the API server refuses that).
    #[arg(long, env = "VNEST_WAKE_ADVERTISE_IP", requires = "wake_address")]
    wake_advertise_ip: Option<IpAddr>,
}

fn init_tracing(format: LogFormat) {
    let filter =
        tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.init(),
    }
}

async fn client(kubeconfig: Option<&std::path::Path>) -> anyhow::Result<Client> {
    let config = match kubeconfig {
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path)
                .with_context(|| format!("reading {}", path.display()))?;
            Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?
        }
        None => Config::infer().await?,
    };
    Ok(Client::try_from(config)?)
}

fn settings(
    args: &Args,
    wake: Option<WakeEndpoint>,
    host_service_cidrs: Vec<ServiceCidr>,
) -> Settings {
    let mut images = Images::default();
    let overrides = [
        (&args.syncer_image, &mut images.syncer),
        (&args.k3s_image, &mut images.k3s),
        (&args.k0s_image, &mut images.k0s),
        (&args.kubernetes_image, &mut images.kubernetes),
        (&args.etcd_image, &mut images.etcd),
    ];
    for (flag, image) in overrides {
        if let Some(value) = flag {
            *image = value.clone();
        }
    }
    Settings {
        images,
        cluster_domain: args.cluster_domain.clone(),
        service_cidr: args.service_cidr,
        host_service_cidrs,
        host_dns: args.host_dns.or_else(|| args.service_cidr.nth(10)),
        wake,
        allow_extra_rules: args.allow_extra_rules,
    }
}

/// The host's Service ranges, from its `kubernetes` ServiceCIDR object (Kubernetes 1.33 and
/// later); none when it cannot be read, which only costs every virtual Service one
/// recreation with its host copy's address.
async fn host_service_cidrs(client: &Client) -> Vec<ServiceCidr> {
    let api: Api<ServiceCIDR> = Api::all(client.clone());
    let cidrs = match api.get_opt("kubernetes").await {
        Ok(found) => found.and_then(|c| c.spec).and_then(|s| s.cidrs),
        Err(e) => {
            tracing::warn!(error = %e, "failed to read the host's ServiceCIDR kubernetes; virtual Services will be recreated with their host copies' addresses");
            None
        }
    };
    let parsed: Vec<ServiceCidr> = cidrs
        .unwrap_or_default()
        .iter()
        .filter_map(|c| c.parse().ok())
        .collect();
    info!(cidrs = ?parsed.iter().map(ToString::to_string).collect::<Vec<_>>(), "host Service ranges");
    parsed
}

/// Binds the wake listener when configured and starts serving it; returns where the cluster
/// reaches it.
async fn start_wake(
    args: &Args,
    client: &Client,
    metrics: &Metrics,
) -> anyhow::Result<Option<WakeEndpoint>> {
    let (Some(address), Some(ip)) = (args.wake_address, args.wake_advertise_ip) else {
        return Ok(None);
    };
    anyhow::ensure!(
        !ip.is_loopback() && !ip.is_unspecified(),
        "--wake-advertise-ip {ip}: an EndpointSlice cannot point at a loopback or unspecified address; use the pod IP"
    );
    let tcp = tokio::net::TcpListener::bind(address)
        .await
        .with_context(|| format!("binding the wake endpoint on {address}"))?;
    let port = tcp.local_addr()?.port();
    info!(%address, advertise = %ip, port, "serving the wake endpoint");
    let wake = Wake {
        client: client.clone(),
        metrics: metrics.clone(),
        cluster_domain: args.cluster_domain.clone(),
        namespaces: args.namespaces.clone(),
    };
    tokio::spawn(listener::serve(tcp, wake));
    Ok(Some(WakeEndpoint { ip, port }))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    init_tracing(args.log_format);
    let client = client(args.kubeconfig.as_deref()).await?;
    let identity = args
        .identity
        .clone()
        .unwrap_or_else(|| format!("vnest-operator-{}", std::process::id()));
    let metrics = Metrics::default();
    let readiness = Readiness::default();
    tokio::spawn(metrics::serve(
        args.metrics_address,
        metrics.clone(),
        readiness.clone(),
    ));

    let wake = start_wake(&args, &client, &metrics).await?;

    let election = (!args.no_leader_election).then(|| {
        LeaderElection::new(
            client.clone(),
            &args.leader_election_namespace,
            &args.leader_election_lease,
            &identity,
            Duration::from_secs(args.leader_election_lease_seconds),
        )
    });
    if let Some(election) = &election {
        election.acquire().await;
    }
    let namespaces: Vec<Option<String>> = if args.namespaces.is_empty() {
        vec![None]
    } else {
        args.namespaces.iter().cloned().map(Some).collect()
    };
    info!(?namespaces, identity = %identity, "starting controllers");
    let settings = settings(&args, wake, host_service_cidrs(&client).await);
    let controllers = futures::future::join_all(namespaces.into_iter().map(|ns| {
        reconcile::controller::run(
            client.clone(),
            settings.clone(),
            metrics.clone(),
            readiness.clone(),
            reconcile::controller::Scope {
                namespace: ns,
                selector: args.selector.clone(),
                concurrency: args.concurrency,
            },
            &identity,
        )
    }));
    match &election {
        Some(election) => tokio::select! {
            _ = controllers => Ok(()),
            _ = election.hold() => anyhow::bail!("lost the leader lease; exiting so a standby can take over"),
        },
        None => {
            controllers.await;
            Ok(())
        }
    }
}
