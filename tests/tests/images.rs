//! The Dockerfiles in `images/` build binaries this workspace really produces (no container
//! engine on CI machines, so `cargo metadata` is the judge): each `<binary>.Dockerfile` builds
//! the package that owns `<binary>`, copies that binary and runs it as non-root; the chart
//! deploys the image of this workspace's version.

use std::{collections::HashMap, process::Command};

use vnest_tests::bed::{repo_root, run};

/// Binary name → package name, for every binary target in the workspace.
fn workspace_binaries() -> HashMap<String, String> {
    let out = run(Command::new(env!("CARGO"))
        .args(["metadata", "--no-deps", "--format-version", "1", "--locked"])
        .current_dir(repo_root()));
    let metadata: serde_json::Value = serde_json::from_str(&out).unwrap();
    let mut binaries = HashMap::new();
    for package in metadata["packages"].as_array().unwrap() {
        for target in package["targets"].as_array().unwrap() {
            if target["kind"]
                .as_array()
                .unwrap()
                .iter()
                .any(|k| k == "bin")
            {
                binaries.insert(
                    target["name"].as_str().unwrap().to_string(),
                    package["name"].as_str().unwrap().to_string(),
                );
            }
        }
    }
    binaries
}

fn dockerfiles() -> Vec<(String, String)> {
    let mut files: Vec<(String, String)> = std::fs::read_dir(repo_root().join("images"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let binary = name.strip_suffix(".Dockerfile")?.to_string();
            Some((binary, std::fs::read_to_string(e.path()).unwrap()))
        })
        .collect();
    files.sort();
    files
}

/// Each Dockerfile builds a workspace binary and runs it as a non-root user.
#[test]
fn every_dockerfile_builds_and_copies_a_workspace_binary_as_non_root() {
    let binaries = workspace_binaries();
    let files = dockerfiles();
    for binary in ["vnest-operator", "vnest-syncer"] {
        assert!(
            files.iter().any(|(b, _)| b == binary),
            "{binary} has an image: {files:?}"
        );
    }
    for (binary, text) in files.iter().filter(|(b, _)| b.starts_with("vnest-")) {
        let package = binaries
            .get(binary)
            .unwrap_or_else(|| panic!("images/{binary}.Dockerfile: no workspace binary {binary}"));
        assert!(
            text.contains(&format!("cargo build --release --locked -p {package}")),
            "images/{binary}.Dockerfile builds package {package}"
        );
        assert!(
            text.contains(&format!(
                "COPY --from=build /src/target/release/{binary} /usr/local/bin/{binary}"
            )),
            "images/{binary}.Dockerfile copies the binary it built"
        );
        assert!(
            text.contains(&format!("ENTRYPOINT [\"/usr/local/bin/{binary}\"]")),
            "images/{binary}.Dockerfile runs {binary}"
        );
        assert!(
            text.contains("USER 65532:65532"),
            "images/{binary}.Dockerfile is non-root"
        );
        let runtime = text.lines().rev().find(|l| l.starts_with("FROM ")).unwrap();
        assert!(runtime.contains("distroless"), "{binary}: {runtime}");
    }
}

/// The value of the last `<instruction> ...` line of a Dockerfile.
fn instruction<'a>(dockerfile: &'a str, name: &str) -> Option<&'a str> {
    dockerfile
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .map(str::trim)
}

/// The images the bed builds offline (tests/testbed/images.sh) are the release images'
/// stand-ins: same reference, same binary at the same path, same entrypoint, same user as
/// `images/<name>.Dockerfile` builds.
#[test]
fn the_local_images_agree_with_the_dockerfiles_on_binary_entrypoint_and_user() {
    let local = vnest_tests::node::local_images();
    for (name, text) in dockerfiles() {
        let tag = match name.as_str() {
            "kubernetes" => instruction(&text, "# tag:")
                .expect("kubernetes.Dockerfile names its tag")
                .to_string(),
            _ => env!("CARGO_PKG_VERSION").to_string(),
        };
        let reference = format!("ghcr.io/vnest-dev/{name}:{tag}");
        let image = local
            .iter()
            .find(|i| i.reference == reference)
            .unwrap_or_else(|| panic!("images.sh builds no {reference}: {local:?}"));
        let user = instruction(&text, "USER").unwrap_or_else(|| panic!("{name}: no USER"));
        assert_eq!(image.user, user, "{name}: user");
        let entrypoint: Vec<String> = instruction(&text, "ENTRYPOINT")
            .map(|e| serde_json::from_str(e).expect("ENTRYPOINT in JSON form"))
            .unwrap_or_default();
        let local_entrypoint: Vec<String> = serde_json::from_str(&image.entrypoint).unwrap();
        assert_eq!(local_entrypoint, entrypoint, "{name}: entrypoint");
        // Every binary the Dockerfile copies (`COPY --from=build <src> <dst>`, one line each) is
        // at the same path in the local image, and the local image holds nothing else.
        let copied: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("COPY --from=build "))
            .filter_map(|l| l.split_whitespace().nth(1))
            .collect();
        let mut local_paths: Vec<&str> = image
            .files
            .iter()
            .filter_map(|f| f.split_once(':').map(|(_, path)| path))
            .collect();
        local_paths.sort();
        let mut expected: Vec<&str> = copied;
        expected.sort();
        assert_eq!(local_paths, expected, "{name}: binaries and their paths");
        for path in &local_entrypoint[..local_entrypoint.len().min(1)] {
            assert!(
                local_paths.contains(&path.as_str()),
                "{name}: entrypoint {path} is a copied binary"
            );
        }
    }
}

/// The chart's default operator image is this workspace's version.
#[test]
fn the_chart_deploys_the_operator_image_of_this_workspace_version() {
    let chart: serde_yaml::Value = serde_yaml::from_str(
        &std::fs::read_to_string(repo_root().join("charts/vnest/Chart.yaml")).unwrap(),
    )
    .unwrap();
    // The chart's image tag defaults to appVersion; the operator tags the syncer image with
    // its own version, so one number names every image of a release.
    assert_eq!(
        chart["appVersion"].as_str(),
        Some(env!("CARGO_PKG_VERSION")),
        "charts/vnest/Chart.yaml appVersion follows the workspace version"
    );
}
