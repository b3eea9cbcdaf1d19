// Command vcsim-lab serves govmomi's vCenter simulator (VPX model) over TLS on loopback for
// vmware-pilot's lab tests. It prints one JSON line on stdout when ready and runs until
// SIGTERM or SIGINT. A line "delay <SoapMethod> <ms>" on stdin sets that method's delay
// (0 removes it) and is answered with one JSON line.
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"log"
	"net"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	_ "github.com/vmware/govmomi/vapi/simulator"
)

func reply(v map[string]any) {
	line, _ := json.Marshal(v)
	os.Stdout.Write(append(line, '\n'))
}

func main() {
	host := flag.String("host", "127.0.0.1", "address to listen on")
	port := flag.Int("port", 0, "port to listen on (0: a free one)")
	user := flag.String("username", "user", "the only accepted user name")
	pass := flag.String("password", "pass", "the only accepted password")
	flag.Parse()

	model := simulator.VPX()
	if err := model.Create(); err != nil {
		log.Fatal(err)
	}
	defer model.Remove()
	model.Service.TLS = new(tls.Config)
	model.Service.RegisterEndpoints = true
	model.Service.Listen = &url.URL{Host: net.JoinHostPort(*host, strconv.Itoa(*port)), User: url.UserPassword(*user, *pass)}
	server := model.Service.NewServer()
	defer server.Close()

	// The simulator crashes a read of `snapshot` on a VM that has none: give each VM one.
	ctx := context.Background()
	client, err := govmomi.NewClient(ctx, server.URL, true)
	if err != nil {
		log.Fatal(err)
	}
	for _, vm := range simulator.Map.All("VirtualMachine") {
		task, err := object.NewVirtualMachine(client.Client, vm.Reference()).CreateSnapshot(ctx, "lab-base", "made by vcsim-lab", false, false)
		if err == nil {
			err = task.Wait(ctx)
		}
		if err != nil {
			log.Fatal(err)
		}
	}
	_ = client.Logout(ctx)

	portNum, _ := strconv.Atoi(server.URL.Port())
	reply(map[string]any{
		"url": server.URL.Scheme + "://" + server.URL.Host + server.URL.Path, "host": *host, "port": portNum,
		"username": *user, "password": *pass, "pid": os.Getpid(),
	})

	go func() {
		delays := map[string]int{}
		lines := bufio.NewScanner(os.Stdin)
		for lines.Scan() {
			f := strings.Fields(lines.Text())
			ms, err := 0, error(nil)
			if len(f) == 3 && f[0] == "delay" {
				ms, err = strconv.Atoi(f[2])
			}
			if len(f) != 3 || f[0] != "delay" || err != nil || ms < 0 {
				reply(map[string]any{"ok": false, "error": "expected: delay <SoapMethod> <ms>"})
				continue
			}
			next := map[string]int{}
			for k, v := range delays {
				next[k] = v
			}
			next[f[1]] = ms
			if ms == 0 {
				delete(next, f[1])
			}
			delays = next // a fresh map each time: requests in flight keep reading the old one
			model.DelayConfig.MethodDelay = next
			reply(map[string]any{"ok": true, "delays": next})
		}
	}()

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
}
