"""Schemathesis hooks for `scripts/fuzz-api.sh`: real users where the API
needs real ones.

createChat, the member addition and the member import take user ids that
must name existing users, and a message import takes senders that must be
members of the chat. A schema cannot say "an id that exists", so random
UUIDs were refused (422 unknown users, 403 not a member) and the fuzzer
never reached the happy path of those operations. These hooks map each
distinct generated UUID in those fields to a distinct user seeded before
the run (FUZZ_USER_IDS, comma-separated; drawn at random, so one chat's
additions rarely meet users it has already), and a message import's
senders to the fuzzing user itself (FUZZ_SELF_ID), the owner and a member
of the chats it creates. Repeats stay repeats and anything that is not a
UUID is left as it was, so a schema-violating case stays schema-violating.

The read side is the same: a random chat id is no chat of the caller's
(404) and a random `up_to` no message of it (422), so marker moves, the
caller's own chat and its messages were fuzzed on their refusals only. On
those operations about half the generated UUIDs in the path (those whose
first byte is even, so a case maps the same way every time) become a chat
the fuzzing user is a member of (FUZZ_CHAT_ID), and then a UUID `up_to` a
message of it (FUZZ_MESSAGE_ID); the other half stay random.

And an `Idempotency-Key` is state too: the fuzzer draws keys from a small
space, so one key met two different bodies and was refused (422, the key
used for another request). A valid key gets a suffix unique to its case;
an invalid one (empty, too long, not visible ASCII) is left invalid, and
a long one keeps its length.
"""
import os
import random
import re
import uuid

import schemathesis

USERS = [u for u in os.environ.get("FUZZ_USER_IDS", "").split(",") if u]
SELF = os.environ.get("FUZZ_SELF_ID", "")
CHAT = os.environ.get("FUZZ_CHAT_ID", "")
MESSAGE = os.environ.get("FUZZ_MESSAGE_ID", "")

# Operations whose path `id` is mapped, half the time, to FUZZ_CHAT_ID.
OWN_CHAT = {
    ("POST", "/v1/chats/{id}/read"),
    ("GET", "/v1/me/chats/{id}"),
    ("GET", "/v1/chats/{id}/messages"),
    ("POST", "/v1/chats/{id}/messages"),
}

# (method, path) -> the body field holding user ids.
ID_LISTS = {
    ("POST", "/v1/chats"): "member_ids",
    ("POST", "/v1/chats/{id}/members"): "user_ids",
    ("POST", "/v1/chats/{id}/members/import"): "user_ids",
}


def _is_uuid(value):
    if not isinstance(value, str):
        return False
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


# Not the `random` module: Hypothesis seeds that one per case, which would
# draw the same users every time.
_draw = random.SystemRandom()


def _real_users(body, field):
    ids = body.get(field)
    if not isinstance(ids, list) or not USERS:
        return
    distinct = list(dict.fromkeys(v for v in ids if _is_uuid(v)))
    real = dict(zip(distinct, _draw.sample(USERS, min(len(distinct), len(USERS)))))
    body[field] = [real.get(v, v) if _is_uuid(v) else v for v in ids]


def _own_chat(case, key):
    """Maps the path's chat id to the fuzzing user's chat when its first
    byte is even, and then `up_to` to a message of that chat."""
    params = case.path_parameters
    if key not in OWN_CHAT or not CHAT or not isinstance(params, dict):
        return
    chat = params.get("id")
    if not _is_uuid(chat) or uuid.UUID(chat).bytes[0] % 2:
        return
    params["id"] = CHAT
    if isinstance(case.body, dict) and MESSAGE and _is_uuid(case.body.get("up_to")):
        case.body["up_to"] = MESSAGE


# What the server takes as a key: 1 to 255 visible ASCII characters.
VALID_KEY = re.compile(r"^[\x21-\x7e]{1,255}$")


def _unique_key(key):
    """The key made unique, at its own length when it is long (the
    coverage phase sends 255 characters to test the bound)."""
    tail = f"-{uuid.uuid4()}"
    if len(key) + len(tail) <= 255:
        return key + tail
    return key[: len(key) - len(tail)] + tail


@schemathesis.hook
def before_call(ctx, case, kwargs):
    """Every phase's cases pass here just before they are sent (the
    generation hooks miss the coverage and example phases)."""
    key = (case.operation.method.upper(), case.operation.path)
    _own_chat(case, key)
    if isinstance(case.body, dict):
        field = ID_LISTS.get(key)
        if field:
            _real_users(case.body, field)
        if key == ("POST", "/v1/chats/{id}/messages/import") and SELF:
            messages = case.body.get("messages")
            for m in messages if isinstance(messages, list) else []:
                if isinstance(m, dict) and _is_uuid(m.get("sender_id")):
                    m["sender_id"] = SELF
    headers = case.headers or {}
    for name, value in list(headers.items()):
        if name.lower() == "idempotency-key" and isinstance(value, str) and VALID_KEY.match(value):
            headers[name] = _unique_key(value)
