"""Machine-made mutants for tools/mutate.sh --generated (docs/testing.md, "Mutation testing").

Runs in tools/.venv-mutate (tools/setup_venv.sh --mutate), which holds the pinned
universalmutator (tools/requirements-mutate.txt). The mutants are universalmutator's own:
mutator.mutants_regexp with the rule files `mutate FILE c` uses (universal.rules, c.rules,
c_like.rules), mutants that change only a string literal left out as `mutate` does by default.
Nothing here decides what a mutant is; this file only names, filters, orders and plants them.

  mutgen.py list MODULE_PATH MODULE SEED   every candidate of one module, in drawing order:
        key, line, original, mutant (tab-separated; \\ \t \n escaped as in C)
  mutgen.py apply FILE LINE MUTANT          FILE with line LINE replaced by MUTANT (escaped),
        to stdout
  mutgen.py version                         the universalmutator version in use

A key is MODULE@HASH, HASH the first 12 hex digits of sha256 over the original line and the
mutant, both stripped of surrounding white space, and how many earlier lines of the module give
the same pair: it does not change when lines are added elsewhere in the file, so a verdict in
tools/mutants-triage.tsv and a result in a --state file follow the mutant through a refactor.

The drawing order is sha256(SEED:key) ascending: a seeded random order in which a mutant keeps
its place relative to the others when the rest of the file changes. tools/mutate.sh takes
candidates in this order until N of them compiled to new code and were judged by the tests.

Left out besides string-only mutants: a mutant whose text equals the original but for white
space. universalmutator itself skips blank lines, #include lines, lines with a block comment's
/* (and the comment's other lines) and the rest of a line after //.
"""
import contextlib
import hashlib
import sys
from importlib.metadata import version

RULES = ["universal.rules", "c.rules", "c_like.rules"]  # genmutants.main for language "c"


def esc(s):
    return s.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")


def unesc(s):
    out, i = [], 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            n = s[i + 1]
            out.append({"n": "\n", "t": "\t", "\\": "\\"}.get(n, "\\" + n))
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def read_lines(path):
    with open(path, encoding="utf-8", errors="surrogateescape", newline="") as f:
        return f.readlines()


def candidates(path, module, seed):
    from universalmutator import mutator
    source = read_lines(path)
    # mutants_regexp prints its progress on stdout, which is ours.
    with contextlib.redirect_stdout(sys.stderr):
        raw = mutator.mutants_regexp(source, ruleFiles=RULES, ignorePatterns=[],
                                     ignoreStringOnly=True)
    seen = {}
    out = []
    for lineno, mutant, _rule, _lr in raw:
        orig = source[lineno - 1]
        if "".join(orig.split()) == "".join(mutant.split()):
            continue
        pair = (orig.strip(), mutant.strip())
        nth = seen.get(pair, 0)
        seen[pair] = nth + 1
        h = hashlib.sha256(f"{pair[0]}\0{pair[1]}\0{nth}".encode("utf-8", "surrogateescape"))
        key = f"{module}@{h.hexdigest()[:12]}"
        order = hashlib.sha256(f"{seed}:{key}".encode()).hexdigest()
        out.append((order, key, lineno, orig.rstrip("\n"), mutant.rstrip("\n")))
    out.sort()
    return out


def main(argv):
    if len(argv) == 5 and argv[1] == "list":
        for _o, key, lineno, orig, mutant in candidates(argv[2], argv[3], argv[4]):
            sys.stdout.write(f"{key}\t{lineno}\t{esc(orig)}\t{esc(mutant)}\n")
    elif len(argv) == 5 and argv[1] == "apply":
        lines = read_lines(argv[2])
        n = int(argv[3])
        end = "\n" if lines[n - 1].endswith("\n") else ""
        lines[n - 1] = unesc(argv[4]) + end
        sys.stdout.write("".join(lines))
    elif len(argv) == 2 and argv[1] == "version":
        print(version("universalmutator"))
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.stdout.reconfigure(errors="surrogateescape")
    sys.exit(main(sys.argv))
