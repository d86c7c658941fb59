#!/bin/bash
# Healthy when the broker answers: an ApiVersions request (v0, which every broker takes)
# on its listener, and the reply's correlation id and error code 0 read back. A log line
# says the broker started once; this asks it each time.
set -euo pipefail
exec 3<>"/dev/tcp/127.0.0.1/${1:-9092}"
# size 12 | api key 18 (ApiVersions) | version 0 | correlation id 7 | client id "hc"
printf '\x00\x00\x00\x0c\x00\x12\x00\x00\x00\x00\x00\x07\x00\x02hc' >&3
# reply: size (4 bytes) | correlation id (4) | error code (2)
reply=$(timeout 3 head -c 10 <&3 | od -An -tx1 | tr -d ' \n')
[ "${reply:8:12}" = "000000070000" ]
