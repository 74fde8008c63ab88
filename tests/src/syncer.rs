//! The syncer binary, run as a real process wired as the StatefulSet wires it: the
//! operator's `vc-config-<name>` configuration, a host kubeconfig carrying a token of the
//! operator-made `vc-<name>` ServiceAccount (so only the operator's Role applies), and the
//! virtual API server's admin kubeconfig, with the API proxy serving the operator-made
//! `<name>-certs` on a loopback port. The tenant reaches it with the operator-made `vc-<name>`
//! kubeconfig, its server pointed at that port.

use std::{
    collections::BTreeMap,
    io::Write,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
};

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client};
use vnest_crds::meta::SYNCER_CONFIG_KEY;

use crate::{
    bed::{bed, client_for, service_account_kubeconfig, workspace_binary},
    fixtures::free_port,
    scrape, wait,
};

/// `$VNEST_SYNCER_BIN`, or `target/debug/vnest-syncer` built by the test command.
pub fn syncer_binary() -> PathBuf {
    workspace_binary("vnest-syncer", "VNEST_SYNCER_BIN")
}

/// A running syncer; killed when dropped, its log printed if the test is failing.
pub struct SyncerProcess {
    child: Child,
    pub metrics_port: u16,
    pub proxy_port: u16,
    /// The `vc-<name>` kubeconfig pointed at this process's proxy.
    pub tenant_kubeconfig: PathBuf,
    pub log: PathBuf,
}

/// How to start a syncer: the files it reads and the virtual namespaces it syncs.
pub struct SyncerWiring {
    pub config: PathBuf,
    pub host_kubeconfig: PathBuf,
    pub virtual_kubeconfig: PathBuf,
    pub virtual_namespace: String,
    /// Secret `<vc>-certs` written out as the pod mounts it.
    pub certs_dir: PathBuf,
    /// `config` of Secret `vc-<vc>`: the kubeconfig the tenant is given.
    pub tenant_kubeconfig: String,
    /// Extra environment of the syncer process (e.g. its fault injection).
    pub env: Vec<(String, String)>,
}

/// Waits for Secret `name` and returns its data.
async fn secret_data(secrets: &Api<Secret>, name: &str) -> BTreeMap<String, Vec<u8>> {
    wait::until(
        &format!("Secret {name}"),
        Duration::from_secs(60),
        || async {
            let secret = secrets.get_opt(name).await.map_err(|e| e.to_string())?;
            let data = secret.and_then(|s| s.data).ok_or("no data yet")?;
            Ok::<_, String>(data.into_iter().map(|(k, v)| (k, v.0)).collect())
        },
    )
    .await
}

/// `kubeconfig` with every cluster's server replaced by `server`.
fn pointed_at(kubeconfig: &str, server: &str) -> String {
    let mut config: serde_json::Value =
        serde_yaml::from_str(kubeconfig).expect("tenant kubeconfig is YAML");
    for cluster in config["clusters"].as_array_mut().expect("clusters") {
        cluster["cluster"]["server"] = server.into();
    }
    serde_yaml::to_string(&config).expect("kubeconfig serializes")
}

impl SyncerWiring {
    /// The wiring of virtual cluster `vc` in host namespace `namespace` once the operator
    /// made its pieces: `vc-config-<vc>` written to a file, a token of ServiceAccount
    /// `vc-<vc>` (bound by the operator's RoleBinding), the bed's virtual admin kubeconfig.
    pub async fn from_operator(
        host: &Client,
        namespace: &str,
        vc: &str,
        virtual_namespace: &str,
    ) -> Self {
        let timeout = Duration::from_secs(60);
        let secrets: Api<Secret> = Api::namespaced(host.clone(), namespace);
        let config = secret_data(&secrets, &format!("vc-config-{vc}")).await;
        let config_path =
            std::env::temp_dir().join(format!("vnest-syncer-{namespace}-config.yaml"));
        std::fs::write(&config_path, &config[SYNCER_CONFIG_KEY]).expect("write syncer config");
        let certs_dir = std::env::temp_dir().join(format!("vnest-syncer-{namespace}-certs"));
        std::fs::create_dir_all(&certs_dir).expect("certs folder");
        for (file, bytes) in secret_data(&secrets, &format!("{vc}-certs")).await {
            std::fs::write(certs_dir.join(file), bytes).expect("write certs");
        }
        let kubeconfig = secret_data(&secrets, &format!("vc-{vc}")).await;
        let tenant_kubeconfig = String::from_utf8(kubeconfig["config"].clone()).expect("UTF-8");
        let account = format!("vc-{vc}");
        for (kind, name) in [
            ("serviceaccount", account.as_str()),
            ("rolebinding", account.as_str()),
            ("service", vc),
        ] {
            wait::until(
                &format!("{kind} {name} from the operator"),
                timeout,
                || async { bed().kubectl(&["-n", namespace, "get", kind, name, "-o", "name"]) },
            )
            .await;
        }
        SyncerWiring {
            config: config_path,
            host_kubeconfig: service_account_kubeconfig(namespace, &account).await,
            virtual_kubeconfig: bed().virtual_kubeconfig(),
            virtual_namespace: virtual_namespace.to_string(),
            certs_dir,
            tenant_kubeconfig,
            env: vec![],
        }
    }
}

impl SyncerProcess {
    /// Starts the syncer with its proxy on a free loopback port.
    pub fn start(wiring: &SyncerWiring, metrics_port: u16) -> Self {
        Self::start_on(wiring, metrics_port, free_port())
    }

    /// Starts the syncer with its proxy on `proxy_port` (the bed's port-forward target,
    /// `VNEST_TESTBED_POD_PROXY_PORT`, makes it the proxy of every fake pod).
    pub fn start_on(wiring: &SyncerWiring, metrics_port: u16, proxy_port: u16) -> Self {
        let temp = std::env::temp_dir();
        let log = temp.join(format!(
            "vnest-syncer-{}-{metrics_port}.log",
            wiring.virtual_namespace
        ));
        let tenant_kubeconfig = temp.join(format!(
            "vnest-tenant-{}-{proxy_port}.kubeconfig",
            wiring.virtual_namespace
        ));
        let server = format!("https://127.0.0.1:{proxy_port}");
        std::fs::write(
            &tenant_kubeconfig,
            pointed_at(&wiring.tenant_kubeconfig, &server),
        )
        .expect("write tenant kubeconfig");
        let file = std::fs::File::create(&log).expect("syncer log file");
        let child = Command::new(syncer_binary())
            .arg("--config")
            .arg(&wiring.config)
            .arg("--host-kubeconfig")
            .arg(&wiring.host_kubeconfig)
            .arg("--virtual-kubeconfig")
            .arg(&wiring.virtual_kubeconfig)
            .arg(format!("--virtual-namespace={}", wiring.virtual_namespace))
            .arg(format!("--metrics-address=127.0.0.1:{metrics_port}"))
            .arg(format!("--proxy-address=127.0.0.1:{proxy_port}"))
            .arg("--certs-dir")
            .arg(&wiring.certs_dir)
            .env("RUST_LOG", "info")
            .envs(wiring.env.iter().map(|(k, v)| (k, v)))
            .env_remove("POD_NAMESPACE")
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("start vnest-syncer");
        SyncerProcess {
            child,
            metrics_port,
            proxy_port,
            tenant_kubeconfig,
            log,
        }
    }

    /// The bed's kubectl as the tenant: the `vc-<name>` kubeconfig, through the proxy.
    pub fn tenant_kubectl(&self, args: &[&str]) -> Result<String, String> {
        bed().kubectl_with(&self.tenant_kubeconfig, args)
    }

    /// A kubeconfig for this proxy (same server and CA) that authenticates with `token`
    /// only, as a pod of the virtual cluster does.
    pub fn token_kubeconfig(&self, token: &str) -> PathBuf {
        let text = std::fs::read_to_string(&self.tenant_kubeconfig).expect("tenant kubeconfig");
        let mut config: serde_json::Value = serde_yaml::from_str(&text).expect("YAML");
        for user in config["users"].as_array_mut().expect("users") {
            user["user"] = serde_json::json!({ "token": token });
        }
        let path = self.tenant_kubeconfig.with_extension("token.kubeconfig");
        std::fs::write(&path, serde_yaml::to_string(&config).expect("YAML")).expect("write");
        path
    }

    /// A client of the virtual cluster as the tenant, through the proxy.
    pub async fn tenant_client(&self) -> Client {
        client_for(&self.tenant_kubeconfig).await
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kills the process at once (as a crash or eviction would).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// `/metrics`, `/readyz` or `/healthz`; the body, or why not.
    pub async fn get(&self, path: &str) -> Result<String, String> {
        scrape::get(self.metrics_port, path).await
    }

    /// `/readyz` as (status code, body): the body says why the syncer is not ready.
    pub async fn readyz(&self) -> Result<(u16, String), String> {
        scrape::answer(self.metrics_port, "/readyz").await
    }

    /// The `/readyz` body once the syncer answers 503 with a body containing `needle`: why
    /// it is not ready.
    pub async fn unready_because(&self, needle: &str) -> String {
        let what = format!("readyz 503 naming {needle}");
        wait::until(&what, Duration::from_secs(60), || async {
            match self.readyz().await {
                Ok((503, body)) if body.contains(needle) => Ok(body),
                other => Err(format!("{other:?}")),
            }
        })
        .await
    }

    /// Sum of a counter over all its label sets.
    pub async fn counter(&self, name: &str) -> Result<f64, String> {
        Ok(scrape::counter(&self.get("/metrics").await?, name))
    }

    /// Host API writes the syncer has made so far, over every resource and verb.
    pub async fn host_writes(&self) -> Result<f64, String> {
        self.counter("vnest_syncer_host_writes_total").await
    }

    /// Reconciles finished so far of every resource whose name contains `resource` (from the
    /// reconcile-duration histogram): proves the syncer has looked at a kind's objects.
    pub async fn reconciles(&self, resource: &str) -> Result<f64, String> {
        let text = self.get("/metrics").await?;
        Ok(text
            .lines()
            .filter(|l| l.starts_with("vnest_syncer_reconcile_duration_seconds_count{"))
            .filter(|l| l.contains(&format!("resource=\"{resource}")))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .fold(0.0, |total, v| total + v))
    }
}

fn print_tail(log: &Path) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines[lines.len().saturating_sub(60)..].join("\n");
    let _ = writeln!(
        std::io::stderr(),
        "--- syncer log {} ---\n{tail}",
        log.display()
    );
}

impl Drop for SyncerProcess {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            print_tail(&self.log);
        }
    }
}
