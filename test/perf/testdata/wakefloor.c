/* wakefloor in C: epoll (edge-triggered) and recv until EAGAIN, nothing
 * else: the floor under a libevent server's CPU per datagram at low rates.
 * Usage: floor PORT (binds 127.0.0.1:PORT). See test/perf/wakefloor. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>

int main(int argc, char **argv) {
	if (argc != 2) {
		fprintf(stderr, "usage: %s PORT\n", argv[0]);
		return 2;
	}
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[1])), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) != 0) {
		perror("bind");
		return 1;
	}
	int e = epoll_create1(0);
	struct epoll_event ev = {.events = EPOLLIN | EPOLLET};
	if (e < 0 || epoll_ctl(e, EPOLL_CTL_ADD, s, &ev) != 0) {
		perror("epoll");
		return 1;
	}
	static char buf[2048];
	for (;;) {
		struct epoll_event out;
		if (epoll_wait(e, &out, 1, -1) < 0)
			continue;
		while (recv(s, buf, sizeof buf, 0) >= 0)
			;
	}
}
