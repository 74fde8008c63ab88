//! `kubectl vnest`: list virtual clusters, get or merge their kubeconfig, pause and resume.
//! Installed as `kubectl-vnest` on the PATH, kubectl runs it for `kubectl vnest ...`.

mod errors;
mod forward;
mod kubeconfig;
mod list;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use k8s_openapi::api::core::v1::Secret;
use kube::{
    Api, Client, Config,
    api::{ListParams, Patch, PatchParams},
    config::{KubeConfigOptions, Kubeconfig},
};
use vnest_crds::{VirtualCluster, meta::ChildNames};

#[derive(Parser)]
#[command(name = "kubectl vnest", version, about)]
struct Cli {
    /// Kubeconfig of the host cluster (default: $KUBECONFIG or ~/.kube/config).
    #[arg(long, global = true)]
    kubeconfig: Option<PathBuf>,
    /// Namespace of the VirtualCluster (default: the kubeconfig context's).
    #[arg(short, long, global = true)]
    namespace: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// VirtualClusters with phase, sleep state, age and endpoint.
    List {
        /// Every namespace.
        #[arg(short = 'A', long)]
        all_namespaces: bool,
    },
    /// Print the tenant kubeconfig of a VirtualCluster.
    Kubeconfig {
        name: String,
        /// Server URL to put in it (for a port-forward or an ingress).
        #[arg(long)]
        server: Option<String>,
    },
    /// Merge the tenant kubeconfig into a kubeconfig file and switch to its context.
    Connect {
        name: String,
        #[arg(long, conflicts_with = "port_forward")]
        server: Option<String>,
        /// Forward a local loopback port to the virtual cluster's API proxy and point the
        /// kubeconfig at it; runs until Ctrl+C.
        #[arg(long)]
        port_forward: bool,
        /// Local port for --port-forward (0: any free port).
        #[arg(long, default_value_t = 0, requires = "port_forward")]
        local_port: u16,
        /// Context name (default: the one the operator chose).
        #[arg(long)]
        context: Option<String>,
        /// File to merge into (default: $KUBECONFIG's first file or ~/.kube/config).
        #[arg(long)]
        output: Option<PathBuf>,
    },
    /// Put a VirtualCluster to sleep until resumed (sets spec.paused).
    Pause { name: String },
    /// Wake a paused VirtualCluster (clears spec.paused).
    Resume { name: String },
}

async fn host_client(path: Option<&Path>) -> Result<Client> {
    let config = match path {
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path)
                .with_context(|| format!("--kubeconfig {}", path.display()))?;
            Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?
        }
        None => Config::infer()
            .await
            .context("no host cluster: set KUBECONFIG or pass --kubeconfig")?,
    };
    Ok(Client::try_from(config)?)
}

/// The tenant kubeconfig of `namespace/name`, from the Secret the operator wrote.
async fn tenant_kubeconfig(
    client: &Client,
    namespace: &str,
    name: &str,
    server: Option<&str>,
) -> Result<Kubeconfig> {
    let vcs: Api<VirtualCluster> = Api::namespaced(client.clone(), namespace);
    let vc = vcs.get(name).await.map_err(|e| {
        errors::explain(e, &format!("VirtualCluster {namespace}/{name}"), namespace)
    })?;
    let secret_name = vc
        .status
        .as_ref()
        .and_then(|s| s.kubeconfig_secret.clone())
        .unwrap_or_else(|| {
            ChildNames::new(
                namespace,
                name,
                vc.spec.export_kubeconfig.secret.name.as_deref(),
            )
            .kubeconfig_secret
        });
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let secret = match secrets.get_opt(&secret_name).await {
        Ok(Some(secret)) => secret,
        Ok(None) => bail!(
            "kubeconfig secret {namespace}/{secret_name} does not exist yet: the VirtualCluster \
             is still being provisioned (`kubectl get vc -n {namespace} {name}`)"
        ),
        Err(e) => {
            return Err(errors::explain(
                e,
                &format!("Secret {namespace}/{secret_name}"),
                namespace,
            ));
        }
    };
    let yaml = secret
        .data
        .as_ref()
        .and_then(|d| d.get("config"))
        .map(|b| String::from_utf8_lossy(&b.0).into_owned())
        .with_context(|| format!("secret {namespace}/{secret_name} has no `config` key"))?;
    let config = kubeconfig::parse(&yaml)?;
    match server {
        Some(server) => kubeconfig::with_server(config, server),
        None => Ok(config),
    }
}

fn default_output() -> Result<PathBuf> {
    if let Some(first) = std::env::var_os("KUBECONFIG")
        .as_ref()
        .and_then(|v| std::env::split_paths(v).next())
    {
        return Ok(first);
    }
    let home = std::env::var_os("HOME").context("HOME is not set; pass --output")?;
    Ok(PathBuf::from(home).join(".kube/config"))
}

async fn set_paused(client: &Client, namespace: &str, name: &str, paused: bool) -> Result<()> {
    let vcs: Api<VirtualCluster> = Api::namespaced(client.clone(), namespace);
    let patch = serde_json::json!({ "spec": { "paused": paused } });
    vcs.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| {
            errors::explain(e, &format!("VirtualCluster {namespace}/{name}"), namespace)
        })?;
    Ok(())
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    match run(Cli::parse()).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<()> {
    let client = host_client(cli.kubeconfig.as_deref()).await?;
    let namespace = cli
        .namespace
        .clone()
        .unwrap_or_else(|| client.default_namespace().to_string());
    match cli.command {
        Command::List { all_namespaces } => {
            let api: Api<VirtualCluster> = if all_namespaces {
                Api::all(client.clone())
            } else {
                Api::namespaced(client.clone(), &namespace)
            };
            let vcs = api
                .list(&ListParams::default())
                .await
                .map_err(|e| errors::explain(e, "list VirtualClusters", &namespace))?;
            if vcs.items.is_empty() {
                eprintln!("no VirtualClusters found");
            } else {
                print!("{}", list::table(&vcs.items, chrono::Utc::now()));
            }
        }
        Command::Kubeconfig { name, server } => {
            let config = tenant_kubeconfig(&client, &namespace, &name, server.as_deref()).await?;
            print!("{}", serde_yaml::to_string(&config)?);
        }
        Command::Connect {
            name,
            server,
            port_forward,
            local_port,
            context,
            output,
        } => {
            let listener = if port_forward {
                let listener = tokio::net::TcpListener::bind(("127.0.0.1", local_port))
                    .await
                    .with_context(|| format!("listening on 127.0.0.1:{local_port}"))?;
                Some(listener)
            } else {
                None
            };
            let server = match &listener {
                Some(l) => Some(format!("https://{}", l.local_addr()?)),
                None => server,
            };
            let mut config =
                tenant_kubeconfig(&client, &namespace, &name, server.as_deref()).await?;
            if let Some(context) = &context {
                config = kubeconfig::renamed(config, context);
            }
            let output = output.map_or_else(default_output, Ok)?;
            let existing = if output.exists() {
                Kubeconfig::read_from(&output)
                    .with_context(|| format!("reading {}", output.display()))?
            } else {
                Kubeconfig::default()
            };
            let previous = existing.current_context.clone();
            let merged = kubeconfig::merge(existing, config);
            if let Some(dir) = output.parent() {
                std::fs::create_dir_all(dir)?;
            }
            std::fs::write(&output, serde_yaml::to_string(&merged)?)
                .with_context(|| format!("writing {}", output.display()))?;
            let current = merged.current_context.unwrap_or_default();
            println!("switched to context {current:?} in {}", output.display());
            if let Some(previous) = previous.filter(|p| *p != current) {
                println!("back to the host: kubectl config use-context {previous}");
            }
            if let Some(listener) = listener {
                let pod = forward::proxy_pod(&name);
                println!(
                    "forwarding {} to {namespace}/{pod}:{}; Ctrl+C to stop",
                    listener.local_addr()?,
                    forward::PROXY_PORT
                );
                let pods = Api::namespaced(client.clone(), &namespace);
                forward::serve(pods, pod, listener).await?;
            }
        }
        Command::Pause { name } => {
            set_paused(&client, &namespace, &name, true).await?;
            println!("virtualcluster {namespace}/{name} paused");
        }
        Command::Resume { name } => {
            set_paused(&client, &namespace, &name, false).await?;
            println!("virtualcluster {namespace}/{name} resumed");
        }
    }
    Ok(())
}
