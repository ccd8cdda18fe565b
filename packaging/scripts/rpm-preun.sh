#!/bin/sh
# rpm %preun: on erase ($1 = 0, not an upgrade) stop and disable the
# service, as Fedora's %systemd_preun does.
if [ "$1" = 0 ] && [ -d /run/systemd/system ]; then
	systemctl --no-reload disable --now pvans.service >/dev/null 2>&1 || :
fi
exit 0
