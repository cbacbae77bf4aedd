"""Per-operator counts of ONNX's node tests that tilebsp passes, from a run of the conformance test.

Usage: /usr/bin/python3 conformance_table.py NODE_DIR LOG  (LOG: node_conformance's output)
Prints a Markdown table: operator, passed, refused (with the reasons), for every operator a case's model uses
alone (a test of one node), and for the expanded cases (function bodies) under the operator they expand.
"""
import os, re, sys, collections
import onnx

node_dir, log = sys.argv[1], sys.argv[2]
outcome = {}
for line in open(log):
    m = re.match(r"(PASS|REFUSED|FAIL)\s+(test_\S+?):?(?:\s|$)(.*)", line)
    if m:
        outcome[m.group(2)] = (m.group(1), m.group(3).strip())
ops = {}
for name in sorted(outcome):
    try:
        model = onnx.load(os.path.join(node_dir, name, "model.onnx"))
        types = [n.op_type for n in model.graph.node]
    except Exception:
        types = []
    op = types[0] if len(types) == 1 else None
    if op is None:
        base = name[len("test_"):].replace("_expanded", "")
        candidates = [t for t in set(types) if base.replace("_", "").lower().startswith(t.lower())]
        op = (max(candidates, key=len) + " (expanded)") if candidates else "(other multi-node cases)"
    ops[name] = op
table = collections.defaultdict(lambda: [0, 0, 0, collections.Counter()])
for name, (kind, why) in outcome.items():
    row = table[ops[name]]
    row[{"PASS": 0, "REFUSED": 1, "FAIL": 2}[kind]] += 1
    if kind == "REFUSED":
        why = re.sub(r"^\S+: ", "", why)
        why = re.sub(r"node '[^']*' \((\w+), opset \d+\): ", "", why)
        why = re.sub(r"node '[^']*' uses operator (\w+).*", r"operator \1 not supported", why)
        why = re.sub(r"input '[^']*' is of type (\w+).*", r"type \1", why)
        row[3][why[:70]] += 1
print("| operator | passed | refused | why refused |")
print("|---|---|---|---|")
for op in sorted(table):
    p, r, f, why = table[op]
    reasons = "; ".join(f"{w} ({k})" if k > 1 else w for w, k in why.most_common(3))
    print(f"| {op} | {p} | {r} | {reasons} |")
tot = [sum(v[i] for v in table.values()) for i in range(3)]
print(f"\n{tot[0]} passed, {tot[1]} refused, {tot[2]} failed of {sum(tot)} node tests.")
