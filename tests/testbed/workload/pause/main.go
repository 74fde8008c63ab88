// pause holds a pod sandbox's namespaces: it waits for SIGTERM or SIGINT and exits. It stands in
// for registry.k8s.io/pause, which cannot be pulled here.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
}
