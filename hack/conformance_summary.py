"""Summarises hack/conformance.sh's JUnit reports: passed / failed / skipped by SIG for each
target run (<out>/<target>/junit_01.xml), and the specs that pass on the host but not in the
virtual cluster when both ran.

    python3 hack/conformance_summary.py OUT_DIR
"""

import re
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path


SUITE_NODES = ("[BeforeSuite]", "[AfterSuite]", "[SynchronizedBeforeSuite]", "[SynchronizedAfterSuite]", "[ReportAfterSuite]")


def outcomes(report: Path) -> dict[str, str]:
    """Spec name -> passed | failed | skipped, for the [Conformance] specs that ran (ginkgo lists
    the specs the focus left out as skipped in no time: not counted) and any suite node that
    failed."""
    result = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        name = case.get("name", "")
        failed = case.find("failure") is not None or case.find("error") is not None
        if name.startswith(SUITE_NODES):
            if failed:
                result[name] = "failed"
            continue
        status = case.get("status", "")
        if "[Conformance]" not in name or (status == "skipped" and float(case.get("time", "0")) == 0):
            continue
        result[name] = "failed" if failed else "skipped" if status == "skipped" else "passed"
    return result


def sig(name: str) -> str:
    found = re.search(r"\[sig-([a-z-]+)\]", name)
    return found.group(1) if found else "other"


def table(target: str, specs: dict[str, str], seconds: str) -> list[str]:
    counts: dict[str, Counter] = {}
    for name, outcome in specs.items():
        counts.setdefault(sig(name), Counter())[outcome] += 1
    total = Counter()
    lines = [f"## {target} ({seconds} s)", "", "| SIG | passed | failed | skipped |", "|---|---|---|---|"]
    for group in sorted(counts):
        c = counts[group]
        total.update(c)
        lines.append(f"| {group} | {c['passed']} | {c['failed']} | {c['skipped']} |")
    lines.append(f"| **all** | **{total['passed']}** | **{total['failed']}** | **{total['skipped']}** |")
    failed = sorted(n for n, o in specs.items() if o == "failed")
    if failed:
        lines += ["", "Failed:", ""] + [f"- {n}" for n in failed]
    return lines + [""]


def main() -> None:
    out = Path(sys.argv[1])
    runs = {}
    lines = ["# vnest conformance run", ""]
    for target in ("host", "virtual"):
        report = out / target / "junit_01.xml"
        if not report.exists():
            continue
        runs[target] = outcomes(report)
        seconds_file = out / target / "seconds"
        seconds = seconds_file.read_text().strip() if seconds_file.exists() else "?"
        lines += table(target, runs[target], seconds)
    if "host" in runs and "virtual" in runs:
        regressions = sorted(n for n, o in runs["host"].items() if o == "passed" and runs["virtual"].get(n) != "passed")
        lines += [f"## Pass on the host, not in the virtual cluster: {len(regressions)}", ""]
        lines += [f"- {n}" for n in regressions] + [""]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
