# tests/hostlist/conf.sh — sourced by record.sh and vs-scontrol.sh:
# hostlist_conf DIR writes DIR/slurm.conf, the least scontrol needs to parse
# hostlists without contacting any daemon, and exports SLURM_CONF to it.
hostlist_conf() {
    cat >"$1/slurm.conf" <<CONF
ClusterName=ddpsim-hostlist
SlurmctldHost=localhost
AuthType=auth/none
CredType=cred/none
NodeName=localhost CPUs=1 State=UNKNOWN
PartitionName=p Nodes=localhost Default=YES
CONF
    SLURM_CONF=$1/slurm.conf
    export SLURM_CONF
}
