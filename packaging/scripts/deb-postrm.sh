#!/bin/sh
# Debian postrm: tell systemd the unit is gone; on purge also forget any
# enablement (deb-systemd-helper, as debhelper does) and remove the state
# systemd made for the unit's StateDirectory (with DynamicUser it lives
# under /var/lib/private), so nothing of pvans is left behind. dpkg removes
# the conffile /etc/pvans/pvans.yaml itself on purge.
set -e
if [ -d /run/systemd/system ]; then
	systemctl --system daemon-reload >/dev/null || true
fi
if [ "$1" = purge ]; then
	if command -v deb-systemd-helper >/dev/null; then
		deb-systemd-helper purge pvans.service >/dev/null || true
	fi
	rm -rf /var/lib/pvans /var/lib/private/pvans
fi
exit 0
