"""Checks texts sampled under JSON-schema grammars (tests/test_grammar.c).

usage: json_schema_check.py SAMPLES.jsonl

Each line is {"schema": ..., "text": ...}: the text must parse as JSON
(Python's json) and validate against the schema (jsonschema, Draft 2020-12).
Exits 1 naming every text that does not.
"""
import json
import sys

import jsonschema


def main():
    bad = n = 0
    with open(sys.argv[1], encoding="utf-8") as f:
        for line in f:
            case = json.loads(line)
            n += 1
            try:
                value = json.loads(case["text"])
                jsonschema.validate(value, case["schema"], cls=jsonschema.Draft202012Validator)
            except (ValueError, jsonschema.ValidationError) as e:
                bad += 1
                print("json_schema_check: %r: %s" % (case["text"], str(e).splitlines()[0]))
    print("json_schema_check: %d of %d texts valid" % (n - bad, n))
    return 1 if bad or not n else 0


if __name__ == "__main__":
    sys.exit(main())
