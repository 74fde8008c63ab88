// Command dig asks a DNS server one question, as BIND's dig does, with the options the
// Kubernetes conformance probes use: +tcp/+notcp, +search/+nosearch, +short; other +options
// (+noall, +answer) change nothing, since only the answer section is ever printed. The server
// is the first nameserver of /etc/resolv.conf unless @server names one. The exit status is
// dig's: 0 when a reply came (NXDOMAIN too), 9 when none did.
package main

import (
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/miekg/dns"
)

type question struct {
	name, server       string
	qtype              uint16
	tcp, search, short bool
}

func parse(args []string) question {
	q := question{qtype: dns.TypeA}
	for _, arg := range args {
		switch {
		case arg == "+tcp" || arg == "+vc":
			q.tcp = true
		case arg == "+notcp" || arg == "+novc":
			q.tcp = false
		case arg == "+search":
			q.search = true
		case arg == "+nosearch":
			q.search = false
		case arg == "+short":
			q.short = true
		case strings.HasPrefix(arg, "+"):
		case strings.HasPrefix(arg, "@"):
			q.server = arg[1:]
		default:
			if t, ok := dns.StringToType[strings.ToUpper(arg)]; ok && q.name != "" {
				q.qtype = t
			} else {
				q.name = arg
			}
		}
	}
	return q
}

func main() {
	q := parse(os.Args[1:])
	if q.name == "" {
		fmt.Fprintln(os.Stderr, "usage: dig [@server] [+tcp|+notcp] [+search] [+short] name [type]")
		os.Exit(1)
	}
	conf, err := dns.ClientConfigFromFile("/etc/resolv.conf")
	if err != nil {
		fmt.Fprintf(os.Stderr, ";; reading /etc/resolv.conf: %v\n", err)
		os.Exit(10)
	}
	server := q.server
	if server == "" && len(conf.Servers) > 0 {
		server = conf.Servers[0]
	}
	names := []string{dns.Fqdn(q.name)}
	if q.search {
		names = conf.NameList(q.name)
	}
	client := &dns.Client{Net: "udp", Timeout: 5 * time.Second}
	if q.tcp {
		client.Net = "tcp"
	}
	var reply *dns.Msg
	for _, name := range names {
		msg := new(dns.Msg)
		msg.SetQuestion(name, q.qtype)
		reply, _, err = client.Exchange(msg, net.JoinHostPort(server, conf.Port))
		if err != nil {
			fmt.Fprintf(os.Stderr, ";; connection timed out; no servers could be reached: %v\n", err)
			os.Exit(9)
		}
		// Like dig, the search list is walked until a name exists.
		if reply.Rcode != dns.RcodeNameError {
			break
		}
	}
	for _, rr := range reply.Answer {
		if q.short {
			fmt.Println(strings.TrimPrefix(rr.String(), rr.Header().String()))
		} else {
			fmt.Println(rr.String())
		}
	}
}
