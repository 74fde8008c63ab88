//! The test bed, started by `tests/testbed/up.sh` on first use and torn down when the test
//! process exits (up.sh's reaper watches our pid).

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    process::Command,
    sync::{
        OnceLock,
        atomic::{AtomicU32, Ordering},
    },
};

use k8s_openapi::api::core::v1::Namespace;
use kube::{
    Api, Client, Config,
    api::{DeleteParams, ObjectMeta, PostParams},
    config::{KubeConfigOptions, Kubeconfig},
};

/// Where the bed's binaries, kubeconfigs and servers are, from up.sh's env file.
#[derive(Debug)]
pub struct TestBed {
    pub env: HashMap<String, String>,
}

/// The repository root (this crate lives in `tests/`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// Runs `command` to its end: its stdout, or a panic naming it with its stderr (for the bed's
/// own scripts and tools, which must work for a test to mean anything).
pub fn run(command: &mut Command) -> String {
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("cannot run {command:?}: {e}"));
    assert!(
        out.status.success(),
        "{command:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn start() -> TestBed {
    // hack/test.sh starts the bed once for every test binary and owns its lifetime.
    if let Ok(env_file) = std::env::var("VNEST_TESTBED_ENV") {
        return read_env(&env_file);
    }
    let stdout = run(Command::new("bash")
        .arg(repo_root().join("tests/testbed/up.sh"))
        .arg("--owner-pid")
        .arg(std::process::id().to_string()));
    let env_file = stdout.trim().lines().last().unwrap_or_default().to_string();
    read_env(&env_file)
}

fn read_env(env_file: &str) -> TestBed {
    let text = std::fs::read_to_string(env_file)
        .unwrap_or_else(|e| panic!("reading test bed env {env_file:?}: {e}"));
    let env = text
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    TestBed { env }
}

/// The shared test bed, started on first call.
pub fn bed() -> &'static TestBed {
    static BED: OnceLock<TestBed> = OnceLock::new();
    BED.get_or_init(start)
}

impl TestBed {
    pub fn var(&self, key: &str) -> &str {
        self.env
            .get(key)
            .unwrap_or_else(|| panic!("test bed env has no {key}"))
    }

    pub fn host_kubeconfig(&self) -> PathBuf {
        PathBuf::from(self.var("VNEST_HOST_KUBECONFIG"))
    }

    pub fn virtual_kubeconfig(&self) -> PathBuf {
        PathBuf::from(self.var("VNEST_VIRTUAL_KUBECONFIG"))
    }

    /// A binary built for the bed (`kubectl`, `helm`, `kwok`, ...).
    pub fn bin(&self, name: &str) -> PathBuf {
        Path::new(self.var("VNEST_TESTBED_BIN")).join(name)
    }

    /// Kills bed component `name` (`etcd`, `host-apiserver`, ...) with SIGKILL and starts it
    /// again with the same command line (`tests/testbed/restart.sh`), as a crash and a
    /// supervisor's restart would.
    pub fn restart(&self, name: &str) {
        run(Command::new("bash")
            .arg(repo_root().join("tests/testbed/restart.sh"))
            .arg(name)
            .env("VNEST_TESTBED_DIR", self.var("VNEST_TESTBED_DIR")));
    }

    /// A client of the host cluster. Make one per test: clients are bound to their runtime.
    pub async fn host(&self) -> Client {
        client_for(&self.host_kubeconfig()).await
    }

    /// A client of the virtual cluster's API server.
    pub async fn virtual_cluster(&self) -> Client {
        client_for(&self.virtual_kubeconfig()).await
    }

    /// Runs the bed's kubectl against the host; returns stdout, or stderr as the error.
    pub fn kubectl(&self, args: &[&str]) -> Result<String, String> {
        self.kubectl_with(&self.host_kubeconfig(), args)
    }

    /// Runs the bed's kubectl with `kubeconfig`; returns stdout, or stderr as the error.
    pub fn kubectl_with(&self, kubeconfig: &Path, args: &[&str]) -> Result<String, String> {
        let out = Command::new(self.bin("kubectl"))
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(args)
            .output()
            .map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }
}

/// A workspace binary the test command built: `$<env_override>` if set, else
/// `target/debug/<name>` (honouring `CARGO_TARGET_DIR`).
pub fn workspace_binary(name: &str, env_override: &str) -> PathBuf {
    if let Ok(path) = std::env::var(env_override) {
        return PathBuf::from(path);
    }
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| repo_root().join("target"));
    let path = target.join("debug").join(name);
    assert!(
        path.exists(),
        "{} is missing: run `cargo build --workspace --bins` first (hack/test.sh does)",
        path.display()
    );
    path
}

/// A kubeconfig file authenticating as ServiceAccount `namespace/name` of the host with a
/// fresh token (waits for the ServiceAccount to exist, as a new namespace's `default` may not).
pub async fn service_account_kubeconfig(namespace: &str, name: &str) -> PathBuf {
    let script = repo_root().join("tests/testbed/mint-kubeconfig.sh");
    let minted = crate::wait::until(
        &format!("a token for ServiceAccount {namespace}/{name}"),
        std::time::Duration::from_secs(30),
        || async {
            let out = tokio::process::Command::new("bash")
                .arg(&script)
                .args([namespace, name])
                .env("VNEST_TESTBED_DIR", bed().var("VNEST_TESTBED_DIR"))
                .output()
                .await
                .map_err(|e| e.to_string())?;
            if out.status.success() {
                Ok(out.stdout)
            } else {
                Err(String::from_utf8_lossy(&out.stderr).into_owned())
            }
        },
    )
    .await;
    let path = std::env::temp_dir().join(format!("vnest-sa-{namespace}-{name}.kubeconfig"));
    std::fs::write(&path, minted).expect("write kubeconfig");
    path
}

pub async fn client_for(kubeconfig: &Path) -> Client {
    let kc = Kubeconfig::read_from(kubeconfig)
        .unwrap_or_else(|e| panic!("reading {}: {e}", kubeconfig.display()));
    let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("valid kubeconfig");
    Client::try_from(config).expect("client")
}

/// A namespace for one test, deleted when dropped.
/// A test's own namespace. Dropped without [`TestNamespace::delete`] (a failing test
/// unwinding, a forgotten teardown), it is still deleted: the guard asks both the host and
/// the virtual API server, since the name is unique to this test process.
pub struct TestNamespace {
    pub name: String,
    armed: bool,
}

impl TestNamespace {
    /// Creates `<prefix>-<pid>-<n>` on the host.
    pub async fn create(client: &Client, prefix: &str) -> Self {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let name = format!("{prefix}-{}-{n}", std::process::id());
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                ..Default::default()
            },
            ..Default::default()
        };
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .expect("create test namespace");
        TestNamespace { name, armed: true }
    }

    pub async fn delete(mut self, client: &Client) {
        self.armed = false;
        let _ = Api::<Namespace>::all(client.clone())
            .delete(&self.name, &DeleteParams::background())
            .await;
    }
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        // A blocking kubectl, not the test's client: the test's runtime may be unwinding.
        let bed = bed();
        for kubeconfig in [bed.host_kubeconfig(), bed.virtual_kubeconfig()] {
            let _ = bed.kubectl_with(
                &kubeconfig,
                &[
                    "delete",
                    "namespace",
                    &self.name,
                    "--wait=false",
                    "--ignore-not-found",
                ],
            );
        }
    }
}
