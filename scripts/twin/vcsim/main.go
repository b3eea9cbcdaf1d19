// Command vcsim-twin serves govmomi's vCenter simulator for vmware-pilot's twin, built from Debian's
// govmomi sources (which ship the library, not the vcsim command). Its flags are vcsim's:
//
//	vcsim-twin -load DIR -l 127.0.0.1:0     the inventory `govc object.save -d DIR` wrote
//	vcsim-twin -vm 500 -l 127.0.0.1:0       a generated VPX inventory (-dc, -cluster, -host, -vm)
//
// When ready it prints, as vcsim does, one line "export GOVC_URL=https://USER:PASS@HOST:PORT/sdk
// GOVC_SIM_PID=PID" on stdout, and serves until SIGTERM or SIGINT.
package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"log"
	"net/url"
	"os"
	"os/signal"
	"syscall"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
	_ "github.com/vmware/govmomi/vapi/simulator"
)

// adoptSnapshots gives the loaded snapshots the simulator's own type: Debian's govmomi loads them
// as plain data, and a snapshot taken, reverted or removed on such a VM would panic.
func adoptSnapshots() {
	var walk func([]types.VirtualMachineSnapshotTree)
	walk = func(trees []types.VirtualMachineSnapshotTree) {
		for _, t := range trees {
			if plain, ok := simulator.Map.Get(t.Snapshot).(*mo.VirtualMachineSnapshot); ok {
				simulator.Map.Put(&simulator.VirtualMachineSnapshot{VirtualMachineSnapshot: *plain})
			}
			walk(t.ChildSnapshotList)
		}
	}
	for _, e := range simulator.Map.All("VirtualMachine") {
		if vm, ok := e.(*simulator.VirtualMachine); ok && vm.Snapshot != nil {
			walk(vm.Snapshot.RootSnapshotList)
		}
	}
}

func main() {
	load := flag.String("load", "", "load the model from this directory (govc object.save)")
	listen := flag.String("l", "127.0.0.1:8989", "listen address")
	user := flag.String("username", "user", "the only accepted user name")
	pass := flag.String("password", "pass", "the only accepted password")
	dc := flag.Int("dc", 1, "datacenters")
	cluster := flag.Int("cluster", 1, "clusters per datacenter")
	host := flag.Int("host", 1, "standalone hosts per datacenter")
	clusterHost := flag.Int("cluster-host", 3, "hosts per cluster")
	vm := flag.Int("vm", 2, "virtual machines per resource pool")
	flag.Parse()

	model := simulator.VPX()
	if *load != "" {
		if err := model.Load(*load); err != nil {
			log.Fatalf("loading %s: %s", *load, err)
		}
		adoptSnapshots()
	} else {
		model.Datacenter, model.Cluster, model.Host, model.ClusterHost, model.Machine = *dc, *cluster, *host, *clusterHost, *vm
		if err := model.Create(); err != nil {
			log.Fatal(err)
		}
	}
	defer model.Remove()
	model.Service.TLS = new(tls.Config)
	model.Service.RegisterEndpoints = true
	model.Service.Listen = &url.URL{Host: *listen, User: url.UserPassword(*user, *pass)}
	server := model.Service.NewServer()
	defer server.Close()
	u := *server.URL
	u.User = url.UserPassword(*user, *pass)
	fmt.Printf("export GOVC_URL=%s GOVC_SIM_PID=%d\n", u.String(), os.Getpid())

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
}
