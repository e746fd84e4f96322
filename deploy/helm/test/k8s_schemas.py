#!/usr/bin/env python3
"""Writes kubeconform JSON schemas from Kubernetes' own OpenAPI v3 spec.

kubeconform downloads its schemas by default; there is no network here but
the Go module proxy, which serves k8s.io/kubernetes with its
api/openapi-spec/v3/*.json. For every kind (x-kubernetes-group-version-kind)
this writes <kind>[-<group prefix>]-<version>.json, the file name
kubeconform's {{ .ResourceKind }}{{ .KindSuffix }} expands to, holding the
kind's schema and every schema it references under "definitions". Object
schemas with properties get additionalProperties: false (strict: a
misspelled field fails).

usage: k8s_schemas.py OPENAPI_V3_DIR OUT_DIR
"""
import json
import os
import sys

REF_PREFIX = "#/components/schemas/"


def rewrite(node, used):
    """Points $refs at #/definitions, records them, makes objects strict."""
    if isinstance(node, list):
        return [rewrite(x, used) for x in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key == "$ref" and isinstance(value, str) and value.startswith(REF_PREFIX):
            name = value[len(REF_PREFIX):]
            used.add(name)
            out[key] = "#/definitions/" + name
        elif key == "properties" and isinstance(value, dict):
            # Property names are data, not keywords: rewrite their schemas only.
            out[key] = {k: rewrite(v, used) for k, v in value.items()}
        else:
            out[key] = rewrite(value, used)
    if "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    # OpenAPI's nullable: JSON Schema spells it as a type union.
    if out.get("nullable") is True and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    return out


def closure(schemas, root):
    """The schema of `root` and every schema it reaches, rewritten."""
    done, todo, out = set(), [root], {}
    while todo:
        name = todo.pop()
        if name in done or name not in schemas:
            continue
        done.add(name)
        used = set()
        out[name] = rewrite(schemas[name], used)
        todo.extend(used - done)
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, dst = sys.argv[1], sys.argv[2]
    os.makedirs(dst, exist_ok=True)
    schemas = {}
    for f in sorted(os.listdir(src)):
        if f.endswith(".json"):
            with open(os.path.join(src, f)) as fh:
                schemas.update(json.load(fh).get("components", {}).get("schemas", {}))
    written = 0
    for name, schema in schemas.items():
        for gvk in schema.get("x-kubernetes-group-version-kind", []):
            group, version, kind = gvk.get("group", ""), gvk["version"], gvk["kind"]
            suffix = ("-" + group.split(".")[0] if group else "") + "-" + version
            defs = closure(schemas, name)
            doc = dict(defs[name])
            doc["$schema"] = "http://json-schema.org/draft-07/schema#"
            doc["definitions"] = defs
            path = os.path.join(dst, (kind + suffix).lower() + ".json")
            with open(path, "w") as fh:
                json.dump(doc, fh)
            written += 1
    if written == 0:
        sys.exit(f"k8s_schemas.py: no kind found in {src}")
    print(f"k8s_schemas.py: {written} schemas in {dst}")


if __name__ == "__main__":
    main()
