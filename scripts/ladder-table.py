#!/usr/bin/env python3
"""scripts/ladder-table.py FILE.json: the README's "What each rung stops, measured" tables from a
`rung ladder --json` result (docs/ladder.md): per family, blocked/escaped/n.a. per target; every
probe that escaped somewhere; the summary rows. Markdown on stdout."""
import json
import sys


def main(path):
    d = json.load(open(path))
    ts = [t for t in d["targets"] if t.get("available")]
    off = [t for t in d["targets"] if not t.get("available")]
    names = [t["name"] for t in ts]
    fams = []
    for p in d["probes"]:
        if p["family"] not in fams:
            fams.append(p["family"])
    h = d["host"]
    print(f"Measured with `rung ladder --peers --json` (rung {d.get('rung', '?')}) on kernel "
          f"{h['kernel']}, cgroup {h['cgroup']}, KVM: {h['kvm']}; {len(d['probes'])} probes, "
          f"{d['seconds']:.0f} s for the whole run.")
    print()
    print("| family | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for f in fams:
        probes = [p["name"] for p in d["probes"] if p["family"] == f]
        cells = []
        for t in ts:
            r = [t["results"][p]["result"] for p in probes]
            c = f"{r.count('blocked')} blocked"
            if r.count("escaped"):
                c += f", **{r.count('escaped')} escaped**"
            if r.count("n/a"):
                c += f", {r.count('n/a')} n/a"
            cells.append(c)
        print(f"| {f} ({len(probes)}) | " + " | ".join(cells) + " |")
    row = lambda label, fn: print(f"| {label} | " + " | ".join(fn(t) for t in ts) + " |")
    row("**blocked / total**", lambda t: f"**{t['summary']['blocked']}/{t['summary']['total']}**")
    row("reachable syscalls", lambda t: "?" if t["summary"]["reachable_syscalls"] is None
        else f"{t['summary']['reachable_syscalls']} of {t['summary']['syscalls_tried']}")
    row("shared kernel", lambda t: {True: "yes", False: "no", None: "?"}[t["summary"]["shared_kernel"]])
    row("seconds", lambda t: f"{t['summary']['seconds']:.1f}")
    print()
    print("Every probe that escaped in at least one column (`escaped` is checked on the host: "
          "docs/ladder.md):")
    print()
    print("| probe | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for p in d["probes"]:
        r = [t["results"][p["name"]]["result"] for t in ts]
        if "escaped" in r:
            print(f"| `{p['name']}` | " + " | ".join("**escaped**" if x == "escaped" else x
                                                    for x in r) + " |")
    for t in off:
        print()
        print(f"Not run here: `{t['name']}`: {t['why']}.")


if __name__ == "__main__":
    main(sys.argv[1])
