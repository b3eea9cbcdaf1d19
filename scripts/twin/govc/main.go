// Command govc-twin is the part of govc that vmware-pilot's twin needs, built from Debian's govmomi
// sources (which ship the library, not the govc command):
//
//	govc-twin object.save -d DIR [-v]      save every managed object and its properties in the
//	                                       format govmomi's simulator loads (vcsim -load DIR)
//	govc-twin vm.power -on|-off [-force] NAME
//	govc-twin vm.migrate -host HOST NAME   move the VM to the host (a relocation: vcsim has no MigrateVM)
//	govc-twin snapshot.create -vm VM NAME  take a snapshot (no memory, not quiesced) under the current one
//	govc-twin snapshot.remove -vm VM NAME  remove every snapshot of that name (its children are kept)
//	govc-twin host.maintenance -enter|-exit HOST
//
// The last four put the state a gate read on a twin before a rehearsal (vmware-pilot's overlay).
//
// Like govc it reads the connection from the environment only: GOVC_URL, GOVC_USERNAME,
// GOVC_PASSWORD and GOVC_INSECURE, so no secret appears on a command line. With -v, object.save
// prints "Saving <ref>...ok" per object on stdout, then "Saved N total objects to DIR".
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
	"github.com/vmware/govmomi/vim25/xml"
)

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "govc-twin: "+format+"\n", args...)
	os.Exit(1)
}

func connect(ctx context.Context) *govmomi.Client {
	raw := os.Getenv("GOVC_URL")
	if raw == "" {
		fail("GOVC_URL is not set")
	}
	u, err := soap.ParseURL(raw)
	if err != nil || u == nil {
		fail("GOVC_URL is not a URL")
	}
	if name := os.Getenv("GOVC_USERNAME"); name != "" {
		u.User = url.UserPassword(name, os.Getenv("GOVC_PASSWORD"))
	}
	insecure := os.Getenv("GOVC_INSECURE") == "1" || strings.EqualFold(os.Getenv("GOVC_INSECURE"), "true")
	client, err := govmomi.NewClient(ctx, u, insecure)
	if err != nil {
		// The error may carry the URL: say only the host.
		fail("cannot log in to %s: %s", u.Host, strings.ReplaceAll(err.Error(), u.String(), u.Host))
	}
	return client
}

type saver struct {
	dir     string
	verbose bool
	n       int
	seen    map[types.ManagedObjectReference]bool
}

func (s *saver) write(name string, data any) error {
	f, err := os.Create(filepath.Join(s.dir, name) + ".xml")
	if err != nil {
		return err
	}
	enc := xml.NewEncoder(f)
	enc.Indent("", "  ")
	if err = enc.Encode(data); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

type extra struct {
	name string
	data any
}

// extras saves what the property collector does not return but the simulator reads back
// (Debian's govmomi reads back only the DVS ports; it answers the other queries itself).
func extras(ctx context.Context, c *vim25.Client, ref types.ManagedObjectReference) ([]extra, error) {
	switch ref.Type {
	case "VmwareDistributedVirtualSwitch":
		res, err := methods.FetchDVPorts(ctx, c, &types.FetchDVPorts{This: ref})
		if err != nil {
			return nil, err
		}
		return []extra{{"FetchDVPorts", res}}, nil
	}
	return nil, nil
}

func notConnected(err error) bool {
	if soap.IsSoapFault(err) {
		_, ok := soap.ToSoapFault(err).VimFault().(types.HostNotConnected)
		return ok
	}
	return false
}

func (s *saver) save(ctx context.Context, c *vim25.Client, content []types.ObjectContent) error {
	for _, x := range content {
		if s.seen[x.Obj] {
			continue
		}
		s.seen[x.Obj] = true
		x.MissingSet = nil // drop NoPermission faults
		ref := x.Obj.Encode()
		if err := s.write(fmt.Sprintf("%04d-%s", s.n, ref), x); err != nil {
			return err
		}
		s.n++
		if s.verbose {
			fmt.Printf("Saving %s...ok\n", x.Obj)
		}
		more, err := extras(ctx, c, x.Obj)
		if err != nil {
			if notConnected(err) {
				continue
			}
			return err
		}
		if len(more) > 0 {
			if err = os.MkdirAll(filepath.Join(s.dir, ref), 0o700); err != nil {
				return err
			}
			for _, e := range more {
				if err = s.write(filepath.Join(ref, e.name), e.data); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// snapshotRefs lists the snapshots of the VMs in content (not managed entities, so not in the view).
func snapshotRefs(content []types.ObjectContent) []types.ManagedObjectReference {
	var refs []types.ManagedObjectReference
	var walk func([]types.VirtualMachineSnapshotTree)
	walk = func(trees []types.VirtualMachineSnapshotTree) {
		for _, t := range trees {
			refs = append(refs, t.Snapshot)
			walk(t.ChildSnapshotList)
		}
	}
	for _, x := range content {
		for _, p := range x.PropSet {
			if info, ok := p.Val.(types.VirtualMachineSnapshotInfo); ok && p.Name == "snapshot" {
				walk(info.RootSnapshotList)
			}
		}
	}
	return refs
}

func objectSave(args []string) {
	fs := flag.NewFlagSet("object.save", flag.ExitOnError)
	dir := fs.String("d", "", "save objects in this directory (must not exist)")
	verbose := fs.Bool("v", false, "print each object as it is saved")
	_ = fs.Parse(args)
	if *dir == "" {
		fail("object.save needs -d DIR")
	}
	if err := os.Mkdir(*dir, 0o700); err != nil {
		fail("%s", err)
	}
	ctx := context.Background()
	client := connect(ctx)
	defer func() { _ = client.Logout(ctx) }()
	c := client.Client
	s := &saver{dir: *dir, verbose: *verbose, seen: map[types.ManagedObjectReference]bool{}}
	pc := property.DefaultCollector(c)

	var service []types.ObjectContent
	if err := pc.RetrieveOne(ctx, vim25.ServiceInstance, []string{"content"}, &service); err != nil {
		fail("reading the service content: %s", err)
	}
	if err := s.save(ctx, c, service); err != nil {
		fail("%s", err)
	}
	req := types.RetrievePropertiesEx{This: pc.Reference(), Options: types.RetrieveOptions{MaxObjects: 100}}
	for _, p := range service[0].PropSet {
		sc, ok := p.Val.(types.ServiceContent)
		if !ok {
			continue
		}
		for _, ref := range mo.References(sc) {
			all := types.NewBool(true)
			if ref.Type == "LicenseManager" || ref.Type == "ServiceManager" {
				all = nil
			}
			req.SpecSet = append(req.SpecSet, types.PropertyFilterSpec{
				ObjectSet: []types.ObjectSpec{{Obj: ref}},
				PropSet:   []types.PropertySpec{{Type: ref.Type, All: all}},
			})
		}
	}
	v, err := view.NewManager(c).CreateContainerView(ctx, c.ServiceContent.RootFolder, nil, true)
	if err != nil {
		fail("%s", err)
	}
	defer func() { _ = v.Destroy(ctx) }()
	all := types.NewBool(true)
	hop := func(name, kind, path string) types.BaseSelectionSpec {
		return &types.TraversalSpec{SelectionSpec: types.SelectionSpec{Name: name}, Type: kind, Path: path}
	}
	req.SpecSet = append(req.SpecSet, types.PropertyFilterSpec{
		ObjectSet: []types.ObjectSpec{{
			Obj:  v.Reference(),
			Skip: types.NewBool(false),
			SelectSet: []types.BaseSelectionSpec{
				&types.TraversalSpec{
					Type: v.Reference().Type,
					Path: "view",
					SelectSet: []types.BaseSelectionSpec{
						&types.SelectionSpec{Name: "compute"},
						&types.SelectionSpec{Name: "datastore"},
						&types.SelectionSpec{Name: "hostDatastoreSystem"},
						&types.SelectionSpec{Name: "hostNetworkSystem"},
						&types.SelectionSpec{Name: "hostVirtualNicManager"},
					},
				},
				hop("compute", "ComputeResource", "environmentBrowser"),
				hop("datastore", "Datastore", "browser"),
				hop("hostNetworkSystem", "HostSystem", "configManager.networkSystem"),
				hop("hostVirtualNicManager", "HostSystem", "configManager.virtualNicManager"),
				hop("hostDatastoreSystem", "HostSystem", "configManager.datastoreSystem"),
			},
		}},
		PropSet: []types.PropertySpec{
			{Type: "EnvironmentBrowser", All: all},
			{Type: "HostDatastoreBrowser", All: all},
			{Type: "HostDatastoreSystem", All: all},
			{Type: "HostNetworkSystem", All: all},
			{Type: "HostVirtualNicManager", All: all},
			{Type: "ManagedEntity", All: all},
		},
	})
	var entities []types.ObjectContent
	res, err := methods.RetrievePropertiesEx(ctx, c, &req)
	if err != nil {
		fail("%s", err)
	}
	for {
		if res.Returnval == nil {
			break
		}
		entities = append(entities, res.Returnval.Objects...)
		if err = s.save(ctx, c, res.Returnval.Objects); err != nil {
			fail("%s", err)
		}
		token := res.Returnval.Token
		if token == "" {
			break
		}
		more, err := methods.ContinueRetrievePropertiesEx(ctx, c, &types.ContinueRetrievePropertiesEx{This: req.This, Token: token})
		if err != nil {
			fail("%s", err)
		}
		ret := more.Returnval
		res = &types.RetrievePropertiesExResponse{Returnval: &ret}
	}
	for _, ref := range snapshotRefs(entities) {
		var snap []types.ObjectContent
		err := pc.RetrieveOne(ctx, ref, nil, &snap)
		if err != nil {
			var fault soap.HasFault
			if errors.As(err, &fault) {
				continue // gone since the VM was read
			}
			fail("%s", err)
		}
		if err = s.save(ctx, c, snap); err != nil {
			fail("%s", err)
		}
	}
	fmt.Printf("Saved %d total objects to %q\n", s.n, *dir)
}

// entity is the first managed entity of that kind ("VirtualMachine", "HostSystem") with that name.
func entity(ctx context.Context, client *govmomi.Client, kind, name string) types.ManagedObjectReference {
	v, err := view.NewManager(client.Client).CreateContainerView(ctx, client.ServiceContent.RootFolder, []string{kind}, true)
	if err != nil {
		fail("%s", err)
	}
	defer func() { _ = v.Destroy(ctx) }()
	var found []types.ObjectContent
	if err = v.Retrieve(ctx, []string{kind}, []string{"name"}, &found); err != nil {
		fail("%s", err)
	}
	for _, x := range found {
		for _, p := range x.PropSet {
			if p.Name == "name" && p.Val == name {
				return x.Obj
			}
		}
	}
	fail("%s %q not found", map[string]string{"VirtualMachine": "vm", "HostSystem": "host"}[kind], name)
	return types.ManagedObjectReference{}
}

func wait(ctx context.Context, task *object.Task, err error) {
	if err == nil {
		err = task.Wait(ctx)
	}
	if err != nil {
		fail("%s", err)
	}
}

func vmPower(args []string) {
	fs := flag.NewFlagSet("vm.power", flag.ExitOnError)
	on := fs.Bool("on", false, "power on")
	off := fs.Bool("off", false, "power off")
	_ = fs.Bool("force", false, "hard power off (the only kind this command does)")
	_ = fs.Parse(args)
	if *on == *off || fs.NArg() != 1 {
		fail("usage: vm.power -on|-off [-force] NAME")
	}
	ctx := context.Background()
	client := connect(ctx)
	defer func() { _ = client.Logout(ctx) }()
	obj := object.NewVirtualMachine(client.Client, entity(ctx, client, "VirtualMachine", fs.Arg(0)))
	want := types.VirtualMachinePowerStatePoweredOn
	if *off {
		want = types.VirtualMachinePowerStatePoweredOff
	}
	state, err := obj.PowerState(ctx)
	if err != nil {
		fail("%s", err)
	}
	if state == want {
		fmt.Printf("%s is %s already\n", fs.Arg(0), want)
		return
	}
	if *off {
		task, err := obj.PowerOff(ctx)
		wait(ctx, task, err)
	} else {
		task, err := obj.PowerOn(ctx)
		wait(ctx, task, err)
	}
	fmt.Printf("%s %s\n", fs.Arg(0), want)
}

func vmMigrate(args []string) {
	fs := flag.NewFlagSet("vm.migrate", flag.ExitOnError)
	host := fs.String("host", "", "the host to move the VM to")
	_ = fs.Parse(args)
	if *host == "" || fs.NArg() != 1 {
		fail("usage: vm.migrate -host HOST NAME")
	}
	ctx := context.Background()
	client := connect(ctx)
	defer func() { _ = client.Logout(ctx) }()
	vm := object.NewVirtualMachine(client.Client, entity(ctx, client, "VirtualMachine", fs.Arg(0)))
	to := entity(ctx, client, "HostSystem", *host)
	spec := types.VirtualMachineRelocateSpec{Host: &to}
	// The host's own resource pool, as a migration to another cluster needs.
	var h mo.HostSystem
	if err := client.RetrieveOne(ctx, to, []string{"parent"}, &h); err == nil && h.Parent != nil {
		var cr mo.ComputeResource
		if err = client.RetrieveOne(ctx, *h.Parent, []string{"resourcePool"}, &cr); err == nil {
			spec.Pool = cr.ResourcePool
		}
	}
	task, err := vm.Relocate(ctx, spec, types.VirtualMachineMovePriorityDefaultPriority)
	wait(ctx, task, err)
	fmt.Printf("%s on %s\n", fs.Arg(0), *host)
}

func snapshotTree(ctx context.Context, client *govmomi.Client, vm types.ManagedObjectReference) []types.VirtualMachineSnapshotTree {
	var o mo.VirtualMachine
	if err := client.RetrieveOne(ctx, vm, []string{"snapshot"}, &o); err != nil {
		fail("%s", err)
	}
	if o.Snapshot == nil {
		return nil
	}
	return o.Snapshot.RootSnapshotList
}

func snapshotCmd(name string, args []string) {
	fs := flag.NewFlagSet(name, flag.ExitOnError)
	vmName := fs.String("vm", "", "the VM")
	_ = fs.Parse(args)
	if *vmName == "" || fs.NArg() != 1 {
		fail("usage: %s -vm VM NAME", name)
	}
	ctx := context.Background()
	client := connect(ctx)
	defer func() { _ = client.Logout(ctx) }()
	ref := entity(ctx, client, "VirtualMachine", *vmName)
	vm := object.NewVirtualMachine(client.Client, ref)
	if name == "snapshot.create" {
		task, err := vm.CreateSnapshot(ctx, fs.Arg(0), "put on the twin by vmware-pilot's overlay", false, false)
		wait(ctx, task, err)
		fmt.Printf("%s: snapshot %s created\n", *vmName, fs.Arg(0))
		return
	}
	var named []types.ManagedObjectReference
	var walk func([]types.VirtualMachineSnapshotTree)
	walk = func(trees []types.VirtualMachineSnapshotTree) {
		for _, t := range trees {
			if t.Name == fs.Arg(0) {
				named = append(named, t.Snapshot)
			}
			walk(t.ChildSnapshotList)
		}
	}
	walk(snapshotTree(ctx, client, ref))
	if len(named) == 0 {
		fail("%s has no snapshot %q", *vmName, fs.Arg(0))
	}
	for _, snap := range named {
		res, err := methods.RemoveSnapshot_Task(ctx, client.Client, &types.RemoveSnapshot_Task{This: snap, RemoveChildren: false})
		if err != nil {
			fail("%s", err)
		}
		wait(ctx, object.NewTask(client.Client, res.Returnval), nil)
	}
	fmt.Printf("%s: %d snapshot(s) %s removed\n", *vmName, len(named), fs.Arg(0))
}

func hostMaintenance(args []string) {
	fs := flag.NewFlagSet("host.maintenance", flag.ExitOnError)
	enter := fs.Bool("enter", false, "enter maintenance mode")
	exit := fs.Bool("exit", false, "exit maintenance mode")
	_ = fs.Parse(args)
	if *enter == *exit || fs.NArg() != 1 {
		fail("usage: host.maintenance -enter|-exit HOST")
	}
	ctx := context.Background()
	client := connect(ctx)
	defer func() { _ = client.Logout(ctx) }()
	host := object.NewHostSystem(client.Client, entity(ctx, client, "HostSystem", fs.Arg(0)))
	if *enter {
		task, err := host.EnterMaintenanceMode(ctx, 0, false, nil)
		wait(ctx, task, err)
		fmt.Printf("%s in maintenance mode\n", fs.Arg(0))
	} else {
		task, err := host.ExitMaintenanceMode(ctx, 0)
		wait(ctx, task, err)
		fmt.Printf("%s out of maintenance mode\n", fs.Arg(0))
	}
}

func main() {
	if len(os.Args) < 2 {
		fail("usage: govc-twin object.save | vm.power | vm.migrate | snapshot.create | snapshot.remove | host.maintenance")
	}
	switch os.Args[1] {
	case "object.save":
		objectSave(os.Args[2:])
	case "vm.power":
		vmPower(os.Args[2:])
	case "vm.migrate":
		vmMigrate(os.Args[2:])
	case "snapshot.create", "snapshot.remove":
		snapshotCmd(os.Args[1], os.Args[2:])
	case "host.maintenance":
		hostMaintenance(os.Args[2:])
	default:
		fail("unknown command %q", os.Args[1])
	}
}
