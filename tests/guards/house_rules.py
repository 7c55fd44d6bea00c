#!/usr/bin/env python3
"""The house rules of the code (docs/architecture.md "House rules"), checked.

  house_rules.py SOURCE_DIR

Fails, naming the file and line, when production code (core/, app/, widgets/)
  - compares a policy id as a string outside core/policy/ (ask the policy's
    PolicyInfo for a trait instead: config.info().hindsight, .preparation, ...);
  - has a function of more than 120 lines (universal-ctags measures them);
  - has a file of more than 800 lines.
tests/guards/allowances.txt lists what was over a limit when the rule came, at
the size it had then: an entry may shrink, never grow, and one no longer
needed must be removed, so the list only gets shorter.
Standard library only; needs universal-ctags (scripts/install-deps.sh).
"""
import json
import pathlib
import re
import subprocess
import sys

MAX_FUNCTION = 120
MAX_FILE = 800
SOURCES = ("core", "app", "widgets")
SUFFIXES = {".cpp", ".h", ".c"}


def production_files(root):
    for top in SOURCES:
        for p in sorted((root / top).rglob("*")):
            if p.suffix in SUFFIXES and p.is_file():
                yield p


def policy_ids(root):
    table = (root / "core/policy/registry.cpp").read_text()
    ids = set(re.findall(r'\binfo\("([a-z0-9_]+)"', table))
    if "full" not in ids or len(ids) < 10:
        sys.exit("house_rules: the policy table in core/policy/registry.cpp was not found (info(\"id\", ...) lines)")
    return ids


def string_id_comparisons(root, ids):
    alternatives = "|".join(sorted(map(re.escape, ids)))
    pattern = re.compile(r'(?:==|!=)\s*"(%s)"|"(%s)"\s*(?:==|!=)' % (alternatives, alternatives))
    for path in production_files(root):
        rel = path.relative_to(root)
        if rel.parts[:2] == ("core", "policy"):
            continue
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            code = line.split("//", 1)[0]
            m = pattern.search(code)
            if m:
                yield f"{rel}:{n}: policy id \"{m.group(1) or m.group(2)}\" compared as a string: ask its PolicyInfo for a trait"


def function_lengths(root):
    files = [str(p.relative_to(root)) for p in production_files(root)]
    out = subprocess.run(["ctags", "--fields=+ne", "--kinds-C++=f", "--kinds-C=f", "--output-format=json", "-o", "-"] + files,
                         cwd=root, capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        tag = json.loads(line)
        if tag.get("_type") == "tag" and "end" in tag:
            scope = re.sub(r"__anon[0-9a-f]+(::)?", "", tag.get("scope", "")).strip(":")
            yield tag["path"], (scope + "::" if scope else "") + tag["name"], tag["line"], tag["end"] - tag["line"] + 1


def main():
    root = pathlib.Path(sys.argv[1]).resolve()
    allowances = {}
    allowance_file = root / "tests/guards/allowances.txt"
    for n, line in enumerate(allowance_file.read_text().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if line:
            key, size = line.rsplit(" ", 1)
            allowances[key] = int(size)
    used = set()
    problems = list(string_id_comparisons(root, policy_ids(root)))

    def over(key, size, limit, what):
        if size <= limit:
            return
        if key in allowances:
            used.add(key)
            if size > allowances[key]:
                problems.append(f"{what}: {size} lines, grown past its allowance of {allowances[key]} "
                                f"(tests/guards/allowances.txt; the limit is {limit})")
            return
        problems.append(f"{what}: {size} lines, over the limit of {limit}")

    for path, name, line, size in function_lengths(root):
        over(f"{path} {name}", size, MAX_FUNCTION, f"{path}:{line}: function {name}")
    for path in production_files(root):
        rel = str(path.relative_to(root))
        size = len(path.read_text(errors="replace").splitlines())
        over(rel, size, MAX_FILE, f"{rel}: file")
    for key in sorted(set(allowances) - used):
        problems.append(f"tests/guards/allowances.txt: '{key}' is within the limits now: remove its line")
    for p in problems:
        print(p)
    print(f"house_rules: {len(problems)} problem(s); {len(used)} allowance(s) still needed")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
