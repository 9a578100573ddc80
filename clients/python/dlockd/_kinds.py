"""_kinds.py -- the kinds of lock dlockd serves, one table entry each: where
a holding is acquired (PUT), renewed (POST .../heartbeat) and released
(DELETE), and where its state is read and watched (GET). Everything else
(waiting, renewing, watching, loss) is the same for every kind, so a new
kind of dlockd is one entry here and one method name in client.py. A
semaphore's acquire also says its `limit` (takes_limit); its holders are
told apart by owner like every other kind's, one permit per owner."""
from dataclasses import dataclass
from urllib.parse import quote


@dataclass(frozen=True)
class Kind:
    key: str        # "lock", "fair", "read", "write", "semaphore"
    what: str       # how messages name it: "lock", "fair lock", ...
    holding: str    # the holding's path, {name} quoted in
    status: str     # the state's path (GET, watch)
    takes_limit: bool = False   # its PUT carries limit= (a semaphore's permits)

    def path(self, name, op=""):
        return self.holding.format(name=quote(name, safe="")) + op

    def status_path(self, name):
        return self.status.format(name=quote(name, safe=""))


KINDS = {
    k.key: k for k in (
        Kind("lock", "lock", "/locks/{name}", "/locks/{name}"),
        Kind("fair", "fair lock", "/fairlocks/{name}", "/fairlocks/{name}"),
        Kind("read", "read lock", "/rwlocks/{name}/read", "/rwlocks/{name}"),
        Kind("write", "write lock", "/rwlocks/{name}/write", "/rwlocks/{name}"),
        Kind("semaphore", "semaphore", "/semaphores/{name}", "/semaphores/{name}",
             takes_limit=True),
    )
}
