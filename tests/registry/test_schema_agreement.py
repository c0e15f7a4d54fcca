#!/usr/bin/python3
"""Our descriptor validator and schemas/model.schema.json agree.

For every *.yaml in the corpus:
  valid/     both the C validator (descriptor_check) and the JSON Schema accept it;
  invalid/   both reject it;
  semantic/  the C validator rejects it while the schema accepts it: these are
             the rules a JSON Schema cannot express (the schema's description
             lists them), kept here so the split stays deliberate.
Each corpus file may carry `# expect: TEXT` lines; TEXT must appear in the C
validator's report (e.g. ":7:22: inputs[1].dtype: unknown dtype"), so the
field paths and line:column positions are checked too.

YAML is read as the C side reads it: YAML 1.2 core schema for plain scalars
(PyYAML alone would follow YAML 1.1, where `yes` is a boolean and `010` is
octal), duplicate keys rejected.

Uses only Debian packages: python3-yaml, python3-jsonschema.
"""
import argparse
import json
import os
import re
import subprocess
import sys

import jsonschema
import yaml


class CoreLoader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 core-schema typing and no duplicate keys."""


CoreLoader.yaml_implicit_resolvers = {}
_RESOLVERS = [
    ("tag:yaml.org,2002:bool", r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
    ("tag:yaml.org,2002:int", r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", "-+0123456789"),
    ("tag:yaml.org,2002:float",
     r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
     "-+0123456789."),
    ("tag:yaml.org,2002:null", r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
]
for _tag, _regexp, _first in _RESOLVERS:
    CoreLoader.add_implicit_resolver(_tag, re.compile(_regexp), list(_first))


def _construct_int(loader, node):
    text = loader.construct_scalar(node)
    if text.startswith(("0o", "0x")):
        return int(text, 0)
    return int(text, 10)


def _construct_float(loader, node):
    text = loader.construct_scalar(node)
    body = text.lstrip("+-")
    if body.lower() == ".inf":
        return float("-inf") if text.startswith("-") else float("inf")
    if body.lower() == ".nan":
        return float("nan")
    return float(text)


def _construct_mapping(loader, node, deep=False):
    seen = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        try:
            hash(key)
        except TypeError:
            continue  # unhashable key: PyYAML reports it below
        if key in seen:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping", node.start_mark,
                "found duplicate key %r" % (key,), key_node.start_mark)
        seen[key] = True
    return loader.construct_mapping(node, deep=deep)


CoreLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)
CoreLoader.add_constructor("tag:yaml.org,2002:float", _construct_float)
CoreLoader.add_constructor("tag:yaml.org,2002:map",
                           lambda loader, node: _construct_mapping(loader, node, deep=True))


def schema_verdict(validator, path):
    """(accepted, reason) by the JSON Schema."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = yaml.load(f, Loader=CoreLoader)
    except yaml.YAMLError as e:
        return False, "YAML: %s" % str(e).splitlines()[0]
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
    if errors:
        e = errors[0]
        where = ".".join(str(p) for p in e.absolute_path) or "(root)"
        return False, "%s: %s" % (where, e.message)
    return True, ""


def c_verdict(check, path):
    """(accepted, report) by descriptor_check."""
    r = subprocess.run([check, path], capture_output=True, text=True, timeout=60)
    if r.returncode not in (0, 1):
        raise RuntimeError("descriptor_check crashed on %s (exit %d): %s" % (path, r.returncode, r.stderr))
    return r.returncode == 0, r.stdout


def expectations(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return [m.group(1).rstrip() for m in re.finditer(r"^# expect: (.*)$", f.read(), re.M)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", required=True, help="descriptor_check binary")
    ap.add_argument("--schema", required=True)
    ap.add_argument("--corpus", required=True)
    args = ap.parse_args()

    with open(args.schema, encoding="utf-8") as f:
        schema = json.load(f)
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)

    want = {"valid": (True, True), "invalid": (False, False), "semantic": (False, True)}
    failures, counts = [], {}
    for folder, (c_want, schema_want) in want.items():
        d = os.path.join(args.corpus, folder)
        names = sorted(n for n in os.listdir(d) if n.endswith(".yaml"))
        counts[folder] = len(names)
        for name in names:
            path = os.path.join(d, name)
            c_ok, report = c_verdict(args.check, path)
            s_ok, reason = schema_verdict(validator, path)
            line = "%-9s %-32s C=%-7s schema=%-7s" % (folder, name, "valid" if c_ok else "invalid",
                                                     "valid" if s_ok else "invalid")
            problems = []
            if c_ok != c_want:
                problems.append("C validator says %s:\n%s" % ("valid" if c_ok else "invalid", report))
            if s_ok != schema_want:
                problems.append("JSON Schema says %s %s" % ("valid" if s_ok else "invalid", reason))
            for e in expectations(path):
                if e not in report:
                    problems.append("report lacks %r:\n%s" % (e, report))
            if not c_ok:
                # Every problem line is "FILE:line:col: path: message" or
                # "FILE: message" (file-level), never anything else.
                for l in report.splitlines()[1:]:
                    if not l.startswith(path + ":"):
                        problems.append("malformed report line %r" % l)
            if folder == "invalid" and not c_ok and not re.search(re.escape(path) + r":\d+:\d+: ", report):
                problems.append("no line:column in the report:\n%s" % report)
            print(line + ("  FAIL" if problems else ""))
            for p in problems:
                failures.append("%s/%s: %s" % (folder, name, p))

    if counts["valid"] < 15 or counts["invalid"] < 25:
        failures.append("corpus too small: %d valid, %d invalid (want >= 15 and >= 25)"
                        % (counts["valid"], counts["invalid"]))
    print("%d valid, %d invalid, %d semantic-only descriptors" % (counts["valid"], counts["invalid"],
                                                                 counts["semantic"]))
    for f in failures:
        print("FAIL " + f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
