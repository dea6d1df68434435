"""Schemathesis hooks for Scripts/fuzz (loaded through SCHEMATHESIS_HOOKS=fuzz_hooks).

- A request whose generated `Content-Encoding` header says gzip gets a gzip body, so the
  fuzzer reaches the server's inflate path with real gzip instead of only ever earning
  `415 unsupported_encoding` for plain JSON labelled gzip.
- Half of the generated POST /sync bodies are made envelope-valid for the dataset schema
  (REVSYNC_FUZZ_SCHEMA): the document describes change sets generically (any entity
  names), so raw generation almost never names a real entity, lists it in `types` and
  uses a temporary id only once. Repaired change sets keep the fuzzed values but use real
  entities and attributes, so they reach validation, conflicts, cascades and commits.
- The devices that Scripts/fuzz registered for the run (REVSYNC_FUZZ_DEVICE_IDS,
  comma-separated) are never revoked, rotated or re-roled: schemathesis can learn their ids
  from GET /devices, and the run would then go on with a dead token. Such a request is
  sent for a fresh random id instead (a 404, as for any unknown device).
- GET /snapshot with a `Range` asks for the file without gzip: a range of the gzip copy is
  bytes of the compressed file (docs/protocol.md, "Resuming"), which `requests` tries to
  inflate from the middle and reports as a network error ("incorrect header check").
  `SnapshotFileTests` covers the gzip copy's ranges.
"""

import gzip
import hashlib
import itertools
import json
import os
import time
import uuid

import schemathesis

PROTECTED_DEVICES = {i for i in os.environ.get("REVSYNC_FUZZ_DEVICE_IDS", "").split(",") if i}


def _header(headers, name):
    for key, value in (headers or {}).items():
        if key.lower() == name:
            return key, value
    return None, None


def _load_entities():
    path = os.environ.get("REVSYNC_FUZZ_SCHEMA")
    if not path:
        return []
    with open(path, encoding="utf-8") as file:
        document = json.load(file)
    return [(entity["name"], entity["attributes"]) for entity in document.get("entities", [])]


ENTITIES = _load_entities()
# Temporary ids are unique per device forever, and raw generation repeats -1, -2…: draw fresh
# ones instead, from a start that moves with the clock, so that the passes of one run (each
# loads this module anew) never hand out the same id.
_TEMPORARY_IDS = itertools.count(-(int(time.time()) % 1_000_000) * 100_000 - 1, -1)
_RESERVED = {"seq", "conflict", "revision", "reason", "resync", "types"}


def _pick(key, choices):
    digest = hashlib.sha256(repr(key).encode("utf-8")).digest()
    return choices[digest[0] % len(choices)]


def _typed(value, attribute):
    """The fuzzed value when it already has the attribute's type, else one of that type made from it."""
    kind = attribute["type"]
    if value is None:
        return None if attribute.get("nullable") else _typed(0, attribute)
    if kind == "string":
        return value if isinstance(value, str) else json.dumps(value)
    if kind == "boolean":
        return value if isinstance(value, bool) else bool(value)
    if kind == "integer":
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        return len(value) if isinstance(value, (str, list, dict)) else int(value) if isinstance(value, float) and abs(value) < 2**62 else 1
    if kind == "double":
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.5
    if kind == "timestamp":
        return value if isinstance(value, str) and value[:1].isdigit() else "2024-02-29 12:30:00.5+01"
    return value


def _repair_change_set(change_set):
    if not isinstance(change_set, dict) or not ENTITIES:
        return change_set
    repaired = {}
    for key, changes in change_set.items():
        if key in _RESERVED or not isinstance(changes, dict):
            continue
        name, attributes = next(((n, a) for n, a in ENTITIES if n == key), None) or _pick(key, ENTITIES)
        if name in repaired:
            continue
        ids = {}
        lists = {}
        for operation in ("create", "update", "delete"):
            given = changes.get(operation)
            values = [v for v in given if isinstance(v, int) and not isinstance(v, bool)] if isinstance(given, list) else []
            if operation == "create":
                values = [ids.setdefault(v, next(_TEMPORARY_IDS)) for v in values]
            lists[operation] = values
        by_id = {}
        given = changes.get("attributes")
        for record, values in (given if isinstance(given, dict) else {}).items():
            if not isinstance(values, dict):
                continue
            try:
                record_id = ids.get(int(record), int(record))
            except ValueError:
                continue
            fields = {}
            for field, value in values.items():
                if field in ("revision", "__oldId__"):
                    fields[field] = value
                    continue
                attribute = next((a for a in attributes if a["name"] == field), None) or _pick(field, attributes)
                fields[attribute["name"]] = _typed(value, attribute)
            by_id[str(record_id)] = fields
        for record in lists["create"]:
            fields = by_id.setdefault(str(record), {})
            for attribute in attributes:
                if not attribute.get("nullable") and attribute["name"] not in fields:
                    fields[attribute["name"]] = _typed(len(fields), attribute)
        for record in lists["update"] + lists["delete"]:
            by_id.setdefault(str(record), {}).setdefault("revision", 0)
        repaired[name] = dict(lists, attributes=by_id)
    return {"types": list(repaired), **repaired}


@schemathesis.hook("map_body")
def repair_sync_body(context, body):
    operation = context.operation
    if operation is None or operation.path != "/sync" or not isinstance(body, dict):
        return body
    if not isinstance(body.get("changeSets"), list) or _pick(json.dumps(body, sort_keys=True, default=str), (True, False)):
        return body
    try:
        return dict(body, changeSets=[_repair_change_set(c) for c in body["changeSets"]])
    except Exception:  # a body this hook did not foresee is sent as generated: it must never stop the run
        return body


@schemathesis.hook
def before_call(context, case, kwargs):
    parameters = case.path_parameters or {}
    if parameters.get("id") in PROTECTED_DEVICES:
        parameters["id"] = str(uuid.uuid4())
    if case.operation.path == "/snapshot" and _header(case.headers, "range")[0] is not None:
        key, _ = _header(case.headers, "accept-encoding")
        case.headers[key or "Accept-Encoding"] = "identity"
    _, encoding = _header(case.headers, "content-encoding")
    if isinstance(encoding, str) and encoding.strip().lower() in ("gzip", "x-gzip") and case.body is not None:
        try:
            raw = json.dumps(case.body).encode("utf-8")
        except (TypeError, ValueError):
            return  # not JSON (a negative case): sent as generated
        kwargs["data"] = gzip.compress(raw)
