#!/usr/bin/env python3
"""The share of changed pages per host on recrawl's change-events topic.

Reads the topic from the beginning with confluent-kafka, parses each value with
json.loads (a plain JSON object, see docs/analysts.md) and prints, per host, the pages
seen, the pages that changed at least once and their share, as tab-separated lines.
Stops once its partitions are assigned and no record came for --idle-seconds.
"""

import argparse
import json
import time
from collections import defaultdict

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException

CHANGE_EVENT = "recrawl.change-event/"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--brokers", default="127.0.0.1:9092", help="bootstrap servers")
    parser.add_argument("--topic", default="recrawl.change-events", help="the change-events topic, with its prefix")
    parser.add_argument("--group", default="analyst-change-share", help="consumer group id")
    parser.add_argument("--idle-seconds", type=float, default=5.0, help="stop after this long without a record")
    args = parser.parse_args()

    consumer = Consumer({
        "bootstrap.servers": args.brokers,
        "group.id": args.group,
        # A report of everything on the topic: start at the beginning, remember nothing.
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    })
    assigned_at = None

    def from_the_beginning(consumer, partitions):
        nonlocal assigned_at
        for partition in partitions:
            partition.offset = OFFSET_BEGINNING
        consumer.assign(partitions)
        assigned_at = time.monotonic()

    consumer.subscribe([args.topic], on_assign=from_the_beginning)
    pages = defaultdict(set)
    changed = defaultdict(set)
    try:
        while True:
            message = consumer.poll(args.idle_seconds)
            if message is None:
                # A whole idle poll after the assignment: one that the assignment fell
                # into may have ended before the first fetch came back.
                if assigned_at is not None and time.monotonic() - assigned_at >= args.idle_seconds:
                    break
                continue
            if message.error():
                raise KafkaException(message.error())
            value = message.value()
            # The first builds of schema 1 wrote a binary envelope before the JSON.
            if not value.startswith(b"{"):
                continue
            event = json.loads(value)
            # The first field names the type and version; a reader skips what it does not
            # know. Schema 2 nests the page's identity; schema 1 had it at the top level.
            schema = event.get("schema")
            if schema == CHANGE_EVENT + "2":
                page = event["page"]
            elif schema == CHANGE_EVENT + "1":
                page = event
            else:
                continue
            pages[page["host"]].add(page["url"])
            if event["changed"]:
                changed[page["host"]].add(page["url"])
    finally:
        consumer.close()

    print("host\tpages\tchanged\tshare")
    for host in sorted(pages):
        seen, changes = len(pages[host]), len(changed[host])
        print(f"{host}\t{seen}\t{changes}\t{changes / seen:.3f}")


if __name__ == "__main__":
    main()
