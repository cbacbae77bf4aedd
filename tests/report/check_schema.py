#!/usr/bin/python3
"""Validates profile JSON files against docs/profile.schema.json, and checks what a schema cannot: references
between its parts (operator and name indices, one memory and one cycle entry per tile, one liveness figure per
step). Usage: check_schema.py SCHEMA PROFILE.json..."""
import json
import sys

import jsonschema


def check(schema, path):
    with open(path) as f:
        doc = json.load(f)
    jsonschema.validate(doc, schema, cls=jsonschema.Draft7Validator)
    tiles = doc["target"]["ipus"] * doc["target"]["tiles_per_ipu"]
    assert len(doc["memory"]) == tiles, f"{path}: {len(doc['memory'])} memory entries for {tiles} tiles"
    ops = len(doc["operators"])
    for program in doc["programs"]:
        for step in program:
            assert step["op"] < ops, f"{path}: step operator {step['op']} of {ops}"
            assert step["compute_cycles"] + step["exchange_cycles"] <= step["est_cycles"], f"{path}: {step}"
            assert all(i < doc["target"]["ipus"] for i in step["ipus"]), f"{path}: {step}"
    detail = doc.get("detail")
    assert detail is not None, f"{path}: no detail (a report's profile.json has it)"
    names = len(detail["names"])
    assert len(detail["tile_cycles"]) == tiles and len(detail["tiles"]) == tiles, path
    for occupants in detail["tiles"]:
        assert all(o[0] < names for o in occupants), path
        assert [o[1] for o in occupants] == sorted((o[1] for o in occupants), reverse=True), path
    assert len(detail["liveness"]) == len(doc["programs"]), path
    for live, program in zip(detail["liveness"], doc["programs"]):
        assert len(live["bytes"]) == len(program), f"{path}: {len(live['bytes'])} liveness figures for {len(program)} steps"
        if program:
            assert live["bytes"][live["peak_step"]] == max(live["bytes"]), path
        assert all(r[0] < names and r[2] <= r[3] < max(1, len(program)) for r in live["ranges"]), path
    print(f"{path}: valid ({sum(len(p) for p in doc['programs'])} steps, {ops} operators, {tiles} tiles)")


def main():
    with open(sys.argv[1]) as f:
        schema = json.load(f)
    jsonschema.Draft7Validator.check_schema(schema)
    for path in sys.argv[2:]:
        check(schema, path)
    # The schema must be able to fail: a profile with a wrong type is refused.
    bad = {"format": "tilebsp-profile", "version": "2"}
    try:
        jsonschema.validate(bad, schema, cls=jsonschema.Draft7Validator)
    except jsonschema.ValidationError:
        pass
    else:
        sys.exit("the schema accepted an invalid profile")


if __name__ == "__main__":
    main()
