// vnest-echo is the tenant workload of the real-node tests: an HTTP server that answers with the
// pod it runs in, and the client side the tests run through `kubectl exec`.
//
//	vnest-echo serve [ADDR]   answer every request with "<hostname> <method> <path>" (default :8080)
//	vnest-echo get URL        print the body of GET URL; exit 1 unless the status is 200
//	vnest-echo resolve NAME   print the addresses NAME resolves to; exit 1 when it does not
//	vnest-echo cat FILE       print FILE
package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fail("usage: vnest-echo serve [ADDR] | get URL | resolve NAME | cat FILE")
	}
	arg := func(i int, what string) string {
		if len(os.Args) <= i {
			fail("vnest-echo " + os.Args[1] + ": missing " + what)
		}
		return os.Args[i]
	}
	switch os.Args[1] {
	case "serve":
		addr := ":8080"
		if len(os.Args) > 2 {
			addr = os.Args[2]
		}
		serve(addr)
	case "get":
		get(arg(2, "URL"))
	case "resolve":
		resolve(arg(2, "NAME"))
	case "cat":
		body, err := os.ReadFile(arg(2, "FILE"))
		if err != nil {
			fail(err.Error())
		}
		os.Stdout.Write(body)
	default:
		fail("vnest-echo: unknown command " + os.Args[1])
	}
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, msg)
	os.Exit(1)
}

func serve(addr string) {
	host, _ := os.Hostname()
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Printf("%s %s %s from %s\n", time.Now().UTC().Format(time.RFC3339), r.Method, r.URL.Path, r.RemoteAddr)
		fmt.Fprintf(w, "%s %s %s\n", host, r.Method, r.URL.Path)
	})
	server := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
		<-stop
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		server.Shutdown(ctx)
	}()
	fmt.Printf("vnest-echo %s listening on %s\n", host, addr)
	if err := server.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		fail(err.Error())
	}
}

func get(url string) {
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		fail(err.Error())
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	os.Stdout.Write(body)
	if resp.StatusCode != http.StatusOK {
		fail(resp.Status)
	}
}

func resolve(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupHost(ctx, name)
	if err != nil {
		fail(err.Error())
	}
	for _, a := range addrs {
		fmt.Println(a)
	}
}
