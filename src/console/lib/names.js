// Names for the ids the API returns, so pages show "Research" or "ada@example.com" rather than a UUID:
// workspaces by id, keys by hash, users by id (the members of the organization's workspaces), interns by
// id. Each list is read once per call; a list the key may not read leaves its ids as they are.
import { listAll, listAllByCursor, seg } from "./api.js";

const safely = (p) => p.catch(() => []);

/** {workspace(id), key(hash), user(id), intern(id)}: each answers a name, or undefined when unknown. */
export async function loadNames({ users = false, withInterns = false } = {}) {
  const [workspaces, keys, internList] = await Promise.all([
    safely(listAll("/workspaces")),
    safely(listAll("/keys?include_disabled=true")),
    withInterns ? safely(listAllByCursor("/interns")) : Promise.resolve([]),
  ]);
  const people = new Map();
  if (users) {
    const lists = await Promise.all(workspaces.map((w) => safely(listAll(`/workspaces/${seg(w.id)}/members`))));
    for (const m of lists.flat()) people.set(m.user_id, m.email || m.name);
  }
  const byId = new Map(workspaces.map((w) => [w.id, w.name]));
  const byHash = new Map(keys.map((k) => [k.hash, k.name]));
  const internNames = new Map(internList.map((i) => [i.id, i.name]));
  return {
    workspaces,
    keys,
    workspace: (id) => byId.get(id),
    key: (hash) => byHash.get(hash),
    user: (id) => people.get(id),
    intern: (id) => internNames.get(id),
  };
}
