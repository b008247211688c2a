// Command load is the migration run's traffic (conformance/migrate.sh):
// a backend (serve) and a client that counts what fails while the node
// proxy changes hands underneath it. It is test support, not part of the
// proxy.
//
//	load serve                      # HTTP :8080 (answers its hostname), TCP line echo :9000
//	load client -http URL,... -rate 12 -long HOST:9000 -long-count 4 \
//	    -dns NAME@SERVER:53 -sticky URL
//
// The client opens a new TCP connection for every HTTP request (-rate per
// second over the -http targets in turn), sends a DNS query through
// -dns every 200 ms, keeps -long-count TCP connections to -long open and
// exchanges a line on each every 100 ms (never reconnecting: a broken
// one counts as reset), and asks -sticky which backend answers, counting
// changes. On SIGTERM or SIGINT it prints its counts on one line,
//
//	load: requests=N failed=N long-lived=N reset=N dns=N dns-failed=N sticky=N sticky-moves=N slowest-ms=N
//
// and the first failures with their times (an HTTP request's also with
// the time it was sent and how far its connection got: never connected,
// or connected from which local address and whether the request was
// written) on stderr as they happen, and every 10 s a
// progress line with its time and the counts so far.
//
// The backend prints every 10 s how many HTTP requests it answered since
// its last line, per client address (`load: serve: TIME ADDR=N ...`), so
// that a lost request the backend never saw can be told from one it
// answered too late.
package main
