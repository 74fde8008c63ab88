// Command getent looks a host name up as glibc's `getent hosts` does (/etc/hosts, then DNS with
// /etc/resolv.conf's search list) and prints one `address name` line per address; the exit
// status is 2 when the name is unknown. Only the `hosts` database is served.
package main

import (
	"context"
	"fmt"
	"net"
	"os"
)

func main() {
	if len(os.Args) != 3 || os.Args[1] != "hosts" {
		fmt.Fprintln(os.Stderr, "usage: getent hosts name")
		os.Exit(1)
	}
	name := os.Args[2]
	resolver := &net.Resolver{PreferGo: true}
	addresses, err := resolver.LookupHost(context.Background(), name)
	if err != nil || len(addresses) == 0 {
		os.Exit(2)
	}
	for _, address := range addresses {
		fmt.Printf("%-15s %s\n", address, name)
	}
}
