#!/usr/bin/env python3
"""Validates constrained outputs independently of the C++ matcher.

Usage: validate_outputs.py OUTPUTS.json...
Each OUTPUTS.json is a list of {"schema": ..., "output": "..."} written by the
grammar tests' RandomSchemas* cases (into the directory TANDEM_GRAMMAR_OUTPUTS). Each output must
parse as JSON (json.loads) and validate against its schema (python3-jsonschema,
Draft 2020-12). Exit 0 when all do, 1 with the failures listed, 2 on bad input.
"""
import json
import sys

import jsonschema


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    cases = []
    for path in sys.argv[1:]:
        try:
            with open(path) as f:
                cases += json.load(f)
        except (OSError, ValueError) as e:
            print(f"{path}: {e}", file=sys.stderr)
            return 2
    failures = 0
    for i, case in enumerate(cases):
        try:
            value = json.loads(case["output"])
            jsonschema.validate(value, case["schema"], cls=jsonschema.Draft202012Validator)
        except (ValueError, jsonschema.ValidationError) as e:
            failures += 1
            print(f"case {i}: {e}\n  schema: {json.dumps(case['schema'])}\n  output: {case['output']!r}")
    print(f"{len(cases)} outputs, {failures} invalid")
    return 1 if failures or not cases else 0


if __name__ == "__main__":
    sys.exit(main())
