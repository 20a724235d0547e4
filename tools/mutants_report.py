#!/usr/bin/env python3
"""The generated-mutant campaign's results as markdown, from its state file
(tools/mutate.sh --generated --state FILE) and the triage
(tools/mutants-triage.tsv): every judged mutant, with the triage's verdict
applied as mutate.sh applies it, and a score per module and per folder.

    tools/mutants_report.py STATE [TRIAGE]   (prints markdown)
"""
import collections
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    state = sys.argv[1]
    triage_path = sys.argv[2] if len(sys.argv) > 2 else os.path.join(HERE, "mutants-triage.tsv")
    triage = {}
    for line in open(triage_path, encoding="utf-8"):
        if line.startswith("#") or not line.strip():
            continue
        f = line.rstrip("\n").split("\t")
        triage[f[0]] = f[1]
    rows = collections.OrderedDict()  # the last judgement of each key counts
    for line in open(state, encoding="utf-8"):
        if line.startswith("#") or not line.strip():
            continue
        f = line.rstrip("\n").split("\t")
        key, module, lineno, status, detail = f[0], f[1], f[2], f[3], f[4]
        orig, mut = (f[6], f[7]) if len(f) > 7 else ("", "")
        verdict = triage.get(key, "")
        if status == "SURVIVED":
            if verdict.startswith("equivalent:"):
                status, detail = "EQUIVALENT", verdict
            elif verdict.startswith("sanitizer:"):
                status, detail = "CAUGHT", "make test's sanitizer stage (" + verdict + ")"
            elif verdict.startswith("test:"):
                detail = "triaged " + verdict + " (its retry with the new test is due)"
        rows[key] = (module, lineno, status, detail, orig, mut)
    cell = lambda s: "`" + s.replace("|", "\\|").replace("`", "").replace("\\n", " / ").strip() + "`"
    print("| module:line | result | original -> mutant | caught by / note |")
    print("|---|---|---|---|")
    for key, (m, ln, st, det, o, mu) in rows.items():
        if st in ("BUILD", "NOCODE"):
            continue
        print("| `%s:%s` | %s | %s -> %s | %s |" % (m, ln, st, cell(o), cell(mu), det))
    print()
    count = collections.defaultdict(collections.Counter)
    for m, ln, st, det, o, mu in rows.values():
        count[m][st] += 1
        count[m.split("/")[0] + "/"][st] += 1
    print("| module | caught | survived | equivalent | triaged, retry due | score |")
    print("|---|---|---|---|---|---|")
    for m in sorted(count, key=lambda k: (k.endswith("/"), k)):
        c = count[m]
        caught = c["CAUGHT"] + c["TIMEOUT"]
        due = sum(1 for mm, ln, st, det, o, mu in rows.values()
                  if st == "SURVIVED" and det.startswith("triaged") and (mm == m or mm.startswith(m)))
        judged = caught + c["SURVIVED"]
        score = "%.0f%%" % (100.0 * caught / judged) if judged else "-"
        print("| `%s` | %d | %d | %d | %d | %s |" % (m, caught, c["SURVIVED"], c["EQUIVALENT"], due,
                                                    score))


if __name__ == "__main__":
    main()
