//! Prints vnest's CRDs as YAML, or with `--write` writes them into the Helm chart
//! (`charts/vnest/crds/virtualclusters.yaml`), where a test checks they never drift.

use std::path::PathBuf;

fn chart_crd_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../charts/vnest/crds/virtualclusters.yaml")
}

fn main() {
    let yaml = match vnest_crds::crds_yaml() {
        Ok(yaml) => yaml,
        Err(err) => {
            eprintln!("failed to serialize the CRDs: {err}");
            std::process::exit(1);
        }
    };
    if std::env::args().any(|a| a == "--write") {
        let path = chart_crd_path();
        if let Err(err) = std::fs::write(&path, yaml) {
            eprintln!("failed to write {}: {err}", path.display());
            std::process::exit(1);
        }
        eprintln!("wrote {}", path.display());
    } else {
        print!("{yaml}");
    }
}
