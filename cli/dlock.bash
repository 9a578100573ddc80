# dlock.bash -- bash completion for dlock (make install puts it in
# share/bash-completion/completions/dlock): subcommands, options, kinds,
# and the names of the locks held (dlock list) where a NAME goes.
_dlock()
{
	local cur prev words cword
	_init_completion 2>/dev/null || {
		cur=${COMP_WORDS[COMP_CWORD]}
		prev=${COMP_WORDS[COMP_CWORD - 1]}
	}
	local cmds="run acquire renew release status list"
	local opts="--kind --server --token-file --cacert --cert --key --owner --wait --timeout
		--no-wait --nonblock --command --verbose --ttl --grace --conflict-exit-code --force
		--json --help --version"
	case $prev in
	-k | --kind)
		COMPREPLY=($(compgen -W "lock fair read write" -- "$cur"))
		return ;;
	--token-file | --cacert | --cert | --key)
		COMPREPLY=($(compgen -f -- "$cur"))
		return ;;
	-s | --server | -o | --owner | -w | --wait | --timeout | -t | --ttl | -g | --grace | \
	-E | --conflict-exit-code | -c | --command)
		return ;;
	esac
	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "$opts" -- "$cur"))
		return
	fi
	local w sub=
	for w in "${COMP_WORDS[@]:1:COMP_CWORD-1}"; do
		case " $cmds " in *" $w "*) sub=$w; break ;; esac
	done
	if [[ -z $sub ]]; then
		COMPREPLY=($(compgen -W "$cmds" -- "$cur"))
	elif [[ $sub != list ]]; then
		COMPREPLY=($(compgen -W "$(dlock list 2>/dev/null)" -- "$cur"))
	fi
}
complete -F _dlock dlock
