// Command etcd is etcd's server entry point, built from go.etcd.io/etcd/server/v3 at the version
// k8s.io/apiserver requires, so the local control plane runs the etcd Kubernetes is tested with.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
