#!/usr/bin/env python3
"""Helpers of Scripts/fuzz (standard library only).

  fuzz_tools.py summary REPORT... [--json OUT] [--quiet]
      Counts the requests schemathesis made (every interaction of its NDJSON reports,
      .ndjson or .ndjson.gz, or summaries this command wrote before with --json), their
      statuses and the 5xx answers; prints a summary. Exit 1 when a 5xx was seen.
  fuzz_tools.py latency --url URL --token T --seconds S [--json OUT]
      An ordinary device's POST /sync loop (a new connection per request, catch-ups and
      small writes); prints count, errors, p50, p99 and max latency. Exit 1 when the p99
      is 1 s or more or a request failed.
  fuzz_tools.py slow-verdict CSV --timeout T --connections N --rate R [--grace G] [--log LOG]
      Reads slowhttptest's per-second CSV; exit 1 unless every connection it opened was
      closed by the server within the timeout (plus the time to open them and a grace).
"""

import argparse
import base64
import collections
import gzip
import json
import math
import re
import sys
import time
import http.client
import urllib.parse


def _read_report(path):
    """The counts of one schemathesis NDJSON report (.ndjson or .ndjson.gz), or of a summary JSON written before."""
    if path.endswith(".json"):
        with open(path, encoding="utf-8") as file:
            return json.load(file)
    counts = {"requests": 0, "statuses": collections.Counter(), "byOperation": collections.defaultdict(collections.Counter),
              "serverErrorExamples": []}
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as lines:
        for line in lines:
            finished = json.loads(line).get("ScenarioFinished")
            if not finished:
                continue
            recorder = finished.get("recorder") or {}
            label = recorder.get("label", "?")
            for interaction in (recorder.get("interactions") or {}).values():
                counts["requests"] += 1
                request = interaction.get("request") or {}
                response = interaction.get("response")
                status = str(response.get("status_code")) if response else "no response"
                counts["statuses"][status] += 1
                counts["byOperation"][label][status] += 1
                if response and response.get("status_code", 0) >= 500 and len(counts["serverErrorExamples"]) < 20:
                    answer = base64.b64decode((response.get("content") or {}).get("$base64", "") or b"")[:300]
                    sent = base64.b64decode((request.get("body") or {}).get("$base64", "") or b"")[:500]
                    counts["serverErrorExamples"].append({
                        "request": f"{request.get('method')} {urllib.parse.urlsplit(request.get('uri', '')).path}",
                        "status": response.get("status_code"),
                        "body": sent.decode("utf-8", "replace"), "answer": answer.decode("utf-8", "replace")})
    return counts


def summary(args):
    requests = 0
    statuses = collections.Counter()
    by_operation = collections.defaultdict(collections.Counter)
    errors = []
    for path in args.reports:
        counts = _read_report(path)
        requests += counts["requests"]
        statuses.update(counts["statuses"])
        for label, per_status in counts["byOperation"].items():
            by_operation[label].update(per_status)
        errors += counts["serverErrorExamples"][: 20 - len(errors)]
    server_errors = sum(n for s, n in statuses.items() if s.isdigit() and int(s) >= 500)
    order = lambda item: (not item[0].isdigit(), item[0])
    if not args.quiet:
        print(f"requests: {requests}")
        print("statuses: " + ", ".join(f"{s}: {n}" for s, n in sorted(statuses.items(), key=order)))
        print(f"5xx: {server_errors}")
        for label in sorted(by_operation):
            print(f"  {label:28} " + ", ".join(f"{s}: {n}" for s, n in sorted(by_operation[label].items(), key=order)))
        for error in errors:
            print(f"  5xx: {error['request']} -> {error['status']} {error['answer']!r}; body {error['body']!r}")
    else:
        print(f"requests: {requests}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump({"requests": requests, "statuses": statuses, "serverErrors": server_errors,
                       "byOperation": by_operation, "serverErrorExamples": errors}, out, indent=2)
    return 1 if server_errors else 0


def percentile(sorted_values, fraction):
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, max(0, math.ceil(fraction * len(sorted_values)) - 1))
    return sorted_values[index]


def latency(args):
    url = urllib.parse.urlsplit(args.url)
    seq = 0
    max_revision = 0
    latencies = []
    failures = collections.Counter()
    # Catch up first (a device that has been syncing all along), so the figures are about the attack.
    for _ in range(1000):
        connection = http.client.HTTPConnection(url.hostname, url.port, timeout=args.request_timeout)
        try:
            connection.request("POST", "/sync", body=json.dumps({"maxRevision": max_revision, "changeSets": []}),
                               headers={"Authorization": f"Bearer {args.token}", "Content-Type": "application/json"})
            page = json.loads(connection.getresponse().read())
        finally:
            connection.close()
        max_revision = page["maxRevision"]
        if not page.get("more"):
            break
    deadline = time.monotonic() + args.seconds
    while time.monotonic() < deadline:
        change_sets = []
        if len(latencies) % 5 == 4:  # every fifth request writes a note
            seq += 1
            change_sets = [{"seq": seq, "types": ["notes"],
                            "notes": {"create": [-seq], "attributes": {str(-seq): {"body": f"probe {seq}", "pinned": False}}}}]
        body = json.dumps({"maxRevision": max_revision, "changeSets": change_sets})
        started = time.monotonic()
        connection = http.client.HTTPConnection(url.hostname, url.port, timeout=args.request_timeout)
        try:
            connection.request("POST", "/sync", body=body, headers={
                "Authorization": f"Bearer {args.token}", "Content-Type": "application/json"})
            response = connection.getresponse()
            payload = response.read()
            elapsed = time.monotonic() - started
            if response.status == 200:
                max_revision = json.loads(payload)["maxRevision"]
            else:
                failures[f"HTTP {response.status}"] += 1
                if change_sets:
                    seq -= 1  # not handled: send the seq again
        except (OSError, http.client.HTTPException) as error:
            elapsed = time.monotonic() - started
            failures[type(error).__name__] += 1
            if change_sets:
                seq -= 1
        finally:
            connection.close()
        latencies.append(elapsed)
        time.sleep(max(0.0, args.interval - elapsed))
    ordered = sorted(latencies)
    result = {"requests": len(latencies), "failures": dict(failures),
              "p50": percentile(ordered, 0.50), "p99": percentile(ordered, 0.99), "max": ordered[-1] if ordered else float("nan")}
    print(f"device /sync during the attack: {result['requests']} requests, "
          f"p50 {result['p50'] * 1000:.1f} ms, p99 {result['p99'] * 1000:.1f} ms, max {result['max'] * 1000:.1f} ms, "
          f"failures {sum(failures.values())}" + (f" ({dict(failures)})" if failures else ""))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(result, out, indent=2)
    ok = ordered and result["p99"] < 1.0 and not failures
    return 0 if ok else 1


def slow_verdict(args):
    rows = []
    with open(args.csv, encoding="utf-8") as table:
        header = None
        for line in table:
            cells = [c.strip() for c in line.strip().split(",")]
            if not cells or not cells[0]:
                continue
            if header is None:
                header = [c.lower() for c in cells]
                continue
            try:
                rows.append({name: int(value) if value.lstrip("-").isdigit() else value for name, value in zip(header, cells)})
            except ValueError:
                continue
    if not rows:
        print(f"slowhttptest wrote no statistics to {args.csv}")
        return 1
    last = rows[-1]
    opening = math.ceil(args.connections / args.rate)
    limit = opening + args.timeout + args.grace
    # slowhttptest stops early, "No open connections left", once the server closed them all.
    ended = exit_status = None
    if args.log:
        with open(args.log, encoding="utf-8", errors="replace") as log:
            text = re.sub(r"\x1b\[[0-9;]*m", "", log.read())
        found = re.findall(r"Test ended on (\d+)\w* second", text)
        ended = int(found[-1]) if found else None
        found = re.findall(r"Exit status: *(.+)", text)
        exit_status = found[-1].strip() if found else None
    print(f"slowhttptest: last sample (second {last.get('seconds')}): closed {last.get('closed')}, pending {last.get('pending')}, "
          f"connected {last.get('connected')}; ended on second {ended}: {exit_status}")
    cleared = next((r["seconds"] for r in rows if r.get("seconds", 0) >= opening and r.get("connected", 1) == 0 and r.get("pending", 1) == 0), None)
    if exit_status == "No open connections left" and ended is not None:
        cleared = min(ended, cleared) if cleared is not None else ended
    peak = max(r.get("connected", 0) for r in rows)
    print(f"  peak connected {peak}; every connection closed by second {cleared if cleared is not None else 'never (still open at the end)'} "
          f"(allowed: {limit} = {opening} s to open + {args.timeout} s timeout + {args.grace} s)")
    ok = cleared is not None and cleared <= limit
    return 0 if ok else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    s = commands.add_parser("summary")
    s.add_argument("reports", nargs="+")
    s.add_argument("--json")
    s.add_argument("--quiet", action="store_true", help="print the number of requests only")
    l = commands.add_parser("latency")
    l.add_argument("--url", required=True)
    l.add_argument("--token", required=True)
    l.add_argument("--seconds", type=float, required=True)
    l.add_argument("--interval", type=float, default=0.1)
    l.add_argument("--request-timeout", type=float, default=10.0)
    l.add_argument("--json")
    v = commands.add_parser("slow-verdict")
    v.add_argument("csv")
    v.add_argument("--timeout", type=int, required=True)
    v.add_argument("--connections", type=int, required=True)
    v.add_argument("--rate", type=int, required=True)
    v.add_argument("--grace", type=int, default=5)
    v.add_argument("--log", help="slowhttptest's output, for its exit status")
    args = parser.parse_args()
    return {"summary": summary, "latency": latency, "slow-verdict": slow_verdict}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
