_hearth__server() {
    local i cur prev opts cmd
    COMPREPLY=()
    if [[ "${BASH_VERSINFO[0]}" -ge 4 ]]; then
        cur="$2"
    else
        cur="${COMP_WORDS[COMP_CWORD]}"
    fi
    prev="$3"
    cmd=""
    opts=""

    for i in "${COMP_WORDS[@]:0:COMP_CWORD}"
    do
        case "${cmd},${i}" in
            ",$1")
                cmd="hearth__server"
                ;;
            hearth__server,help)
                cmd="hearth__server__subcmd__help"
                ;;
            hearth__server,issue-admin-cert)
                cmd="hearth__server__subcmd__issue__subcmd__admin__subcmd__cert"
                ;;
            hearth__server__subcmd__help,help)
                cmd="hearth__server__subcmd__help__subcmd__help"
                ;;
            hearth__server__subcmd__help,issue-admin-cert)
                cmd="hearth__server__subcmd__help__subcmd__issue__subcmd__admin__subcmd__cert"
                ;;
            *)
                ;;
        esac
    done

    case "${cmd}" in
        hearth__server)
            opts="-h -V --state-dir --listen --san --advertise-url --retention --max-wait --stale-after --desired-answers-at-once --deferred-reports-per-second --ostree-repo --registry-auth --registry-ca --window-clock-start --bootstrap-token-ttl --serve-agent --test-render-gate --etcd-endpoints --etcd-ca --etcd-cert --etcd-key --etcd-prefix --kubernetes --kubeconfig --kube-lease --help --version issue-admin-cert help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 1 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --state-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --listen)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --san)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --advertise-url)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --retention)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-wait)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --stale-after)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --desired-answers-at-once)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --deferred-reports-per-second)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --ostree-repo)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --registry-auth)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --registry-ca)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --window-clock-start)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --bootstrap-token-ttl)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --serve-agent)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --test-render-gate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --etcd-endpoints)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --etcd-ca)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --etcd-cert)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --etcd-key)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --etcd-prefix)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kubeconfig)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kube-lease)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        hearth__subcmd__server__subcmd__help)
            opts="issue-admin-cert help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        hearth__subcmd__server__subcmd__help__subcmd__help)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        hearth__subcmd__server__subcmd__help__subcmd__issue__subcmd__admin__subcmd__cert)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        hearth__subcmd__server__subcmd__issue__subcmd__admin__subcmd__cert)
            opts="-h --name --out --days --state-dir --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --name)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --out)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --days)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --state-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
    esac
}

if [[ "${BASH_VERSINFO[0]}" -eq 4 && "${BASH_VERSINFO[1]}" -ge 4 || "${BASH_VERSINFO[0]}" -gt 4 ]]; then
    complete -F _hearth__server -o nosort -o bashdefault -o default hearth-server
else
    complete -F _hearth__server -o bashdefault -o default hearth-server
fi
