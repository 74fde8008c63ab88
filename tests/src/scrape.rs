//! Reading the `/metrics`, `/healthz` and `/readyz` endpoints of processes under test.

/// `path` on `127.0.0.1:port`: the body, or why not.
pub async fn get(port: u16, path: &str) -> Result<String, String> {
    let out = tokio::process::Command::new("curl")
        .args(["-sf", &format!("http://127.0.0.1:{port}{path}")])
        .output()
        .await
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!("{path} not served"))
    }
}

/// `path` on `127.0.0.1:port` whatever its status: (status code, body), or why not.
pub async fn answer(port: u16, path: &str) -> Result<(u16, String), String> {
    let out = tokio::process::Command::new("curl")
        .args([
            "-s",
            "-w",
            "\n%{http_code}",
            &format!("http://127.0.0.1:{port}{path}"),
        ])
        .output()
        .await
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').ok_or(format!("{path}: no answer"))?;
    let code = code
        .parse()
        .map_err(|_| format!("{path}: no answer ({text})"))?;
    Ok((code, body.to_string()))
}

/// Sum of a counter over all its label sets in a Prometheus text exposition.
pub fn counter(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(name) && !l.starts_with('#'))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        // A fold from +0.0: an empty `sum()` of floats is -0.0, which prints as "-0".
        .fold(0.0, |total, v| total + v)
}
