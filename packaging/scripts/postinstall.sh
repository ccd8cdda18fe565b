#!/bin/sh
# After install or upgrade: tell systemd the unit file changed. The service
# is neither enabled nor started: the site reviews /etc/pvans/pvans.yaml
# first, then runs `systemctl enable --now pvans`. An upgrade does not
# restart a running pvans either (docs/upgrading.md: roll replicas one at a
# time with `systemctl restart pvans`).
set -e
if [ -d /run/systemd/system ]; then
	systemctl --system daemon-reload >/dev/null || true
fi
exit 0
