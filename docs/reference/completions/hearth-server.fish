# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_hearth_server_global_optspecs
    string join \n state-dir= listen= san= advertise-url= retention= max-wait= stale-after= desired-answers-at-once= deferred-reports-per-second= ostree-repo= registry-auth= registry-ca= window-clock-start= bootstrap-token-ttl= serve-agent= test-render-gate= etcd-endpoints= etcd-ca= etcd-cert= etcd-key= etcd-prefix= kubernetes kubeconfig= kube-lease= h/help V/version
end

function __fish_hearth_server_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_hearth_server_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_hearth_server_using_subcommand
    set -l cmd (__fish_hearth_server_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c hearth-server -n "__fish_hearth_server_needs_command" -l state-dir -d 'Where the store, the CA, the certificates and the tokens live' -r -F
complete -c hearth-server -n "__fish_hearth_server_needs_command" -l listen -d 'Address to listen on (22623 is the MCO\'s config server port)' -r
complete -c hearth-server -n "__fish_hearth_server_needs_command" -l san -d 'A DNS name or IP address for the serving certificate (repeatable). Default: localhost, 127.0.0.1, ::1 and the host name' -r
complete -c hearth-server -n "__fish_hearth_server_needs_command" -l advertise-url -d 'The URL first-booting nodes are told to reach the server at; with replicas, all of them (comma-separated or repeated, at most 16: the agent fails over between them; the first also serves the agent\'s binaries). Default: https:// and the Host the node\'s request used' -r
complete -c hearth-server -n "__fish_hearth_server_needs_command" -l retention -d 'How many of the newest rendered configs of each pool (and of each node with overlays) are kept; those in use are always kept' -r
complete -c hearth-server -n "__fish_hearth_server_needs_command" -l max-wait -d 'The longest an agent\'s long-poll may wait' -r
complete -c hearth-server -n "__fish_hearth_server_needs_command" -l stale-after -d 'A node not heard from for this long is not ready, and counts as unavailable in rollouts (agents long-poll, so a live one is heard from every --max-wait at least)' -r
complete -c hearth-server -n "__fish_hearth_server_needs_command" -l desired-answers-at-once -d 'How many desired-config answers may be unacknowledged at once: an answer\'s turn ends when its node is next heard from, or 250 to 375 ms after it was taken; the others wait for a turn (at most 20 s). An apply to a large pool then goes out as fast as the agents take it, and their reports do not queue behind thousands of others. 0: no pacing (also while agents older than their acknowledgement remain). Default: 32 per core' -r
complete -c hearth-server -n "__fish_hearth_server_needs_command" -l deferred-reports-per-second -d 'How many status reports a second are asked of the agents answered in a burst, for agents that can hold their reports (hearth-agent can): such an agent takes no turn; its answer goes at once with the time it reports after (at most 60 s ahead; beyond, it waits for a turn). The agent applies at once, so an apply reaches a large pool as fast as the answers can be sent, and its reports come back no faster than this. 0: no deferral (every agent is paced by turns). Default: 1,500 per core. No effect with --desired-answers-at-once 0' -r
complete -c hearth-server -n "__fish_hearth_server_needs_command" -l ostree-repo -d 'Serve this ostree repository (archive mode) to enrolled nodes and admins under /ostree/repo/, for OS image pivots in disconnected sites' -r -F
complete -c hearth-server -n "__fish_hearth_server_needs_command" -l registry-auth -d 'Credentials for resolving MachineConfigs\' tagged osImageURLs (`registry/os:tag`) to digests when they are applied: a containers auth file (`{"auths": {"registry:5000": {"auth": "<base64 user:password>"}}}`, the format of /etc/ostree/auth.json)' -r -F
complete -c hearth-server -n "__fish_hearth_server_needs_command" -l registry-ca -d 'CA certificates (PEM) trusted for those registries, besides the system\'s' -r -F
complete -c hearth-server -n "__fish_hearth_server_needs_command" -l window-clock-start -d 'For tests only (hidden): judge maintenance windows as if the clock read this many Unix seconds at start (and ran on from there). Nothing else uses this clock' -r
complete -c hearth-server -n "__fish_hearth_server_needs_command" -l bootstrap-token-ttl -d 'How long a bootstrap token is valid unless told otherwise: the built-in pools\' tokens made at first start, and `hearth bootstrap-token POOL` without --ttl. 0: never expires' -r
complete -c hearth-server -n "__fish_hearth_server_needs_command" -l serve-agent -d 'Serve the agent to first-booting machines: DIR holds `hearth-agent` (and, for ostree hosts, `hearth-ostree-helper`); every first-boot config writes them to /usr/local/bin, checked against their sha512, with the agent\'s unit. A stock OS image then needs only the pointer Ignition config. Read at start: restart the server to serve new binaries' -r -F
complete -c hearth-server -n "__fish_hearth_server_needs_command" -l test-render-gate -d 'For tests only (hidden): while DIR/hold exists, every render writes DIR/rendering and waits (to prove that nothing else waits for a render)' -r -F
complete -c hearth-server -n "__fish_hearth_server_needs_command" -l etcd-endpoints -d 'Keep the store on etcd v3 instead of the embedded database: the members\' client URLs (http:// or https://), comma-separated or repeated. One member that is down does not fail requests. Several servers on the same --etcd-prefix are equal replicas (each serves everything; one at a time, elected, does the periodic controller work)' -r
complete -c hearth-server -n "__fish_hearth_server_needs_command" -l etcd-ca -d 'The CA certificate (PEM) that signs the etcd members\' certificates: needed for https:// endpoints (TLS), which every endpoint then must be' -r -F
complete -c hearth-server -n "__fish_hearth_server_needs_command" -l etcd-cert -d 'A client certificate (PEM) for etcd members that require one (with --etcd-key)' -r -F
complete -c hearth-server -n "__fish_hearth_server_needs_command" -l etcd-key -d 'The client certificate\'s private key (PEM)' -r -F
complete -c hearth-server -n "__fish_hearth_server_needs_command" -l etcd-prefix -d 'The key prefix of everything this server keeps in etcd (starts and ends with \'/\')' -r
complete -c hearth-server -n "__fish_hearth_server_needs_command" -l kubeconfig -d 'The kubeconfig of --kubernetes. Default: the in-cluster service account, $KUBECONFIG or ~/.kube/config' -r -F
complete -c hearth-server -n "__fish_hearth_server_needs_command" -l kube-lease -d 'The Lease (NAMESPACE/NAME) that elects one controller of --kubernetes: the others wait and take over when its holder stops renewing it' -r
complete -c hearth-server -n "__fish_hearth_server_needs_command" -l kubernetes -d 'Kubernetes mode: no store, no HTTP service; the controller follows a Kubernetes API server\'s MachineConfigs, MachineConfigPools and Nodes (the CRDs of config/kubernetes/crds/), renders pools into rendered MachineConfigs and sets nodes\' desiredConfig under maxUnavailable, pause and maintenance windows (docs/kubernetes.md). Run one at a time'
complete -c hearth-server -n "__fish_hearth_server_needs_command" -s h -l help -d 'Print help'
complete -c hearth-server -n "__fish_hearth_server_needs_command" -s V -l version -d 'Print version'
complete -c hearth-server -n "__fish_hearth_server_needs_command" -f -a "issue-admin-cert" -d 'Issue an admin client certificate from the fleet CA (in --state-dir): NAME.crt and NAME.key (mode 0600) in --out. Use it with `hearth login --client-cert --client-key`. The server need not be stopped; it keeps no copy'
complete -c hearth-server -n "__fish_hearth_server_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c hearth-server -n "__fish_hearth_server_using_subcommand issue-admin-cert" -l name -d 'The admin\'s name: the certificate\'s CN, shown in the server\'s logs' -r
complete -c hearth-server -n "__fish_hearth_server_using_subcommand issue-admin-cert" -l out -d 'Where to write NAME.crt and NAME.key (created with mode 0700 if missing)' -r -F
complete -c hearth-server -n "__fish_hearth_server_using_subcommand issue-admin-cert" -l days -d 'Validity in days' -r
complete -c hearth-server -n "__fish_hearth_server_using_subcommand issue-admin-cert" -l state-dir -d 'Where the store, the CA, the certificates and the tokens live' -r -F
complete -c hearth-server -n "__fish_hearth_server_using_subcommand issue-admin-cert" -s h -l help -d 'Print help'
complete -c hearth-server -n "__fish_hearth_server_using_subcommand help; and not __fish_seen_subcommand_from issue-admin-cert help" -f -a "issue-admin-cert" -d 'Issue an admin client certificate from the fleet CA (in --state-dir): NAME.crt and NAME.key (mode 0600) in --out. Use it with `hearth login --client-cert --client-key`. The server need not be stopped; it keeps no copy'
complete -c hearth-server -n "__fish_hearth_server_using_subcommand help; and not __fish_seen_subcommand_from issue-admin-cert help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
