#!/bin/sh
# rpm %postun: tell systemd the unit changed or is gone; on erase ($1 = 0)
# also remove the state systemd made for the unit's StateDirectory (with
# DynamicUser under /var/lib/private), so nothing of pvans is left behind.
# rpm itself keeps an edited /etc/pvans/pvans.yaml as pvans.yaml.rpmsave.
if [ -d /run/systemd/system ]; then
	systemctl --system daemon-reload >/dev/null 2>&1 || :
fi
if [ "$1" = 0 ]; then
	rm -rf /var/lib/pvans /var/lib/private/pvans
fi
exit 0
