// The test bed's own small programs, packed into local images by images.sh: the pod sandbox's
// pause process and the tenant workload the real-node tests run. Standard library only.
module vnest.dev/testbed/workload

go 1.26.0
