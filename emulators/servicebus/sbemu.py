#!/usr/bin/python3
"""A small Azure Service Bus emulator for tests (queues only).

It speaks what the azservicebus Go SDK needs over plain AMQP 1.0 (the SDK
connects without TLS when the connection string says
UseDevelopmentEmulator=true):

  * SASL ANONYMOUS, and CBS put-token on $cbs (any token is accepted);
  * senders on QUEUE: plain and scheduled messages, duplicate detection by
    message-id within the queue's window;
  * receivers on QUEUE and QUEUE/$DeadLetterQueue in peek-lock mode (lock
    token in the x-opt-lock-token delivery annotation, x-opt-sequence-number,
    x-opt-enqueued-time and x-opt-locked-until annotations, delivery count in
    the header) and in receive-and-delete mode;
  * settlement on the receiver link (accept, modify = abandon, reject with
    com.microsoft:dead-letter, release) and on the management link;
  * lock expiry and redelivery, dead-lettering after the max delivery count;
    a dead letter keeps its sequence number and enqueued time, as on Azure
    (the sub-queue shares its queue's numbering and lists in its order);
  * a queue's DefaultMessageTimeToLive (from the admin PUT; never unless
    given): messages past it are dropped, or dead-lettered with
    DeadLetteringOnMessageExpiration;
  * Azure's limits: 256 KiB messages (also once dead-lettered), message
    properties of 32 KB each and 64 KB in all (also once dead-lettered), dead-letter
    reason and description up to 4,096 characters, lock durations from 5 s
    to 5 min, at most 250 messages per peek, a max delivery count of at least 1 (10 when not given),
    duplicate detection only on queues created with it (a history of 20 s
    to 7 days), message ids up to 128 characters, queue user metadata up to
    1,024 characters, and Azure's queue name rules;
  * fault switches per queue (POST /$emulator/faults/QUEUE on the admin
    port): settlements applied but acknowledged late or never, a receiver
    link detached right after it delivered a message; and a broker clock
    offset (--clock-offset);
  * $management: renew-lock, schedule-message, cancel-scheduled-message
    (refused, MessageNotFound, for a sequence number that is not a
    scheduled message), peek-message, update-disposition;
  * a plain-HTTP ATOM endpoint for the admin client: GET a queue (with its
    runtime counts) and PUT to create one.

It is test equipment: one process, state in memory, no sessions, no topics.
Run it with --help for the flags. It prints "READY amqp=PORT admin=PORT" on
stdout when it accepts connections.
"""

import argparse
import bisect
import html
import http.server
import re
import sys
import threading
import time
import traceback
import uuid
from xml.sax.saxutils import escape

from proton import (Array, Condition, Data, Delivery, Endpoint, Link, Message,
                    UNDESCRIBED, int32, symbol, timestamp)
from proton.handlers import FlowController
from proton.reactor import Container

DLQ_SUFFIX = "/$deadletterqueue"
PEEK_LIMIT = 250
MGMT_SUFFIX = "/$management"
LOCK_LOST = "com.microsoft:message-lock-lost"
MESSAGE_NOT_FOUND = "com.microsoft:message-not-found"
SIZE_EXCEEDED = "amqp:link:message-size-exceeded"
NOT_ALLOWED = "amqp:not-allowed"
MAX_DEAD_LETTER_TEXT = 4096  # characters (UTF-16 units), as Azure's SDKs enforce
MIN_LOCK_S, MAX_LOCK_S = 5.0, 300.0
MIN_DEDUP_S, MAX_DEDUP_S = 20.0, 7 * 24 * 3600.0  # duplicate detection history
MAX_MESSAGE_ID = 128  # characters
MAX_USER_METADATA = 1024  # characters
MAX_QUEUE_NAME = 260  # characters
MAX_TTL_S = 10675199 * 86400.0  # TimeSpan.MaxValue, Azure's "never"
# A message's header (application and system properties): each property at
# most 32 KB, all of them at most 64 KB; Azure refuses more with an error
# that asks to retry. https://learn.microsoft.com/azure/service-bus-messaging/service-bus-quotas
# ("Message property size"); the refusal: https://github.com/Azure/azure-sdk-for-net/issues/15325
MAX_PROPERTY_BYTES, MAX_HEADER_BYTES = 32 * 1024, 64 * 1024
INTERNAL_ERROR = "amqp:internal-error"

CLOCK_OFFSET_MS = 0  # the broker's clock minus the real one (--clock-offset)


def now_ms():
    """The broker's clock, in milliseconds."""
    return int(time.time() * 1000) + CLOCK_OFFSET_MS


def utf16_len(text):
    return len((text or "").encode("utf-16-le")) // 2


def check_queue_settings(lock_s, max_delivery, dedup_s=0.0):
    """None, or why Azure would refuse a queue with these settings (dedup_s:
    the duplicate detection history, 0 when detection is off)."""
    if not MIN_LOCK_S <= lock_s <= MAX_LOCK_S:
        return "LockDuration %gs is outside 5s to 5m" % lock_s
    if max_delivery < 1:
        return "MaxDeliveryCount %d is below 1" % max_delivery
    if dedup_s and not MIN_DEDUP_S <= dedup_s <= MAX_DEDUP_S:
        return "DuplicateDetectionHistoryTimeWindow %gs is outside 20s to 7 days" % dedup_s
    return None


def check_queue_name(name):
    """None, or why Azure would refuse a queue with this name."""
    if not name or utf16_len(name) > MAX_QUEUE_NAME:
        return "the queue name must be 1 to %d characters long" % MAX_QUEUE_NAME
    if name.startswith("/") or name.endswith("/"):
        return "the queue name must not start or end with a slash"
    bad = sorted(set(name) & set("@?#*"))
    if bad:
        return "the queue name must not contain %s" % " ".join(bad)
    return None


def check_user_metadata(text):
    """None, or why Azure would refuse this queue user metadata."""
    if text is not None and utf16_len(text) > MAX_USER_METADATA:
        return "UserMetadata is %d characters long; the limit is %d" % (utf16_len(text), MAX_USER_METADATA)
    return None


def parse_iso_duration(text):
    """Seconds in an ISO 8601 duration such as PT1M or P10DT2H30.5S."""
    m = re.fullmatch(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:([\d.]+)S)?)?", text.strip())
    if not m:
        raise ValueError("not an ISO 8601 duration: %r" % text)
    d, h, mi, s = (float(g) if g else 0.0 for g in m.groups())
    return ((d * 24 + h) * 60 + mi) * 60 + s


def iso_duration(seconds):
    return "PT%gS" % seconds


class Stored:
    """One message held by an entity."""

    def __init__(self, seq, msg, enqueued_ms):
        self.seq = seq
        self.msg = msg  # proton.Message as sent
        self.enqueued_ms = enqueued_ms
        # Lock acquisitions so far, the current one included. Service Bus's
        # DeliveryCount counts the ended ones (abandon, expiry); the wire
        # carries that count and the SDK adds one for the current delivery.
        self.deliveries = 0
        self.visible_ms = 0  # scheduled enqueue time; 0 = active now
        self.lock = None  # lock token (uuid.UUID) while locked
        self.locked_until = 0
        self.delivery = None  # proton Delivery the lock was issued on


class Messages:
    """An entity's messages by sequence number, iterated in ascending order.
    Most arrive with the highest number yet (appended), but a dead letter
    keeps the number it had in its queue, so it may land among older ones
    (a sorted key list, bisect)."""

    def __init__(self):
        self.by_seq = {}
        self.order = []  # the sequence numbers, ascending

    def __len__(self):
        return len(self.by_seq)

    def __contains__(self, seq):
        return seq in self.by_seq

    def __getitem__(self, seq):
        return self.by_seq[seq]

    def get(self, seq, default=None):
        return self.by_seq.get(seq, default)

    def __setitem__(self, seq, stored):
        if seq not in self.by_seq:
            if not self.order or seq > self.order[-1]:
                self.order.append(seq)
            else:
                bisect.insort(self.order, seq)
        self.by_seq[seq] = stored

    def __delitem__(self, seq):
        del self.by_seq[seq]
        i = bisect.bisect_left(self.order, seq)
        del self.order[i]

    def values(self):
        """The messages in sequence order (a snapshot when the caller
        changes the store while it iterates: wrap it in list())."""
        return (self.by_seq[seq] for seq in self.order)

    def from_seq(self, start, count):
        """Up to count messages from sequence number start on."""
        i = bisect.bisect_left(self.order, start)
        return [self.by_seq[seq] for seq in self.order[i:i + count]]


class Entity:
    """A queue or its dead-letter sub-queue."""

    def __init__(self, name, lock_s, max_delivery, dedup_s, dead=None):
        self.name = name
        self.lock_s = lock_s
        self.max_delivery = max_delivery
        self.dedup_s = dedup_s
        self.dead = dead  # the dead-letter Entity, None for a DLQ itself
        # DefaultMessageTimeToLive in seconds (None: never, Azure's default on
        # the standard tier) and DeadLetteringOnMessageExpiration
        self.ttl_s = None
        self.dead_on_expiry = False
        self.requires_session = False  # reported only: no session receivers here
        # The next sequence number, in a list shared with the dead-letter
        # sub-queue: a dead letter keeps its number, so both count as one.
        self.next_seq = dead.next_seq if dead is not None else [1]
        self.messages = Messages()
        self.seen_ids = {}  # message-id -> expiry (ms), for duplicate detection
        self.links = []  # sender links (the clients' receivers)
        self.created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        # fault switches (POST /$emulator/faults/QUEUE)
        self.drop_acks = 0  # the next N link settlements are applied, never acknowledged
        self.ack_delay = 0.0  # link settlements are applied at once, acknowledged this late
        self.detach_after = 0  # detach a receiver link after it delivers N more messages

    def add(self, msg, visible_ms=0):
        """Store msg; returns its sequence number, or None for a duplicate."""
        now = now_ms()
        mid = msg.id
        if self.dedup_s > 0 and mid is not None:
            key = str(mid)
            if self.seen_ids.get(key, 0) > now:
                return None
            self.seen_ids[key] = now + int(self.dedup_s * 1000)
        s = Stored(self.next_seq[0], msg, now)
        s.visible_ms = visible_ms if visible_ms > now else 0
        self.next_seq[0] += 1
        self.messages[s.seq] = s
        return s.seq

    def counts(self):
        now = now_ms()
        active = sum(1 for s in self.messages.values() if not s.visible_ms or s.visible_ms <= now)
        return active, len(self.messages) - active

    def next_available(self):
        now = now_ms()
        for s in self.messages.values():
            if s.lock is None and s.visible_ms <= now:
                return s
        return None

    def by_lock(self, token):
        for s in self.messages.values():
            if s.lock == token and s.locked_until > now_ms():
                return s
        return None


class Broker:
    """All entities, guarded by one lock shared by the AMQP and HTTP threads."""

    def __init__(self, args):
        self.args = args
        self.mutex = threading.RLock()
        self.queues = {}

    def queue(self, name, create=None):
        key = name.lower()
        q = self.queues.get(key)
        if q is None and (create or (create is None and self.args.auto_create)) and check_queue_name(name) is None:
            q = self.create(name, self.args.lock_duration, self.args.max_delivery_count,
                            self.args.duplicate_detection_window)
        return q

    def create(self, name, lock_s, max_delivery, dedup_s):
        dead = Entity(name + "/$DeadLetterQueue", lock_s, 0, 0)
        q = Entity(name, lock_s, max_delivery, dedup_s, dead)
        self.queues[name.lower()] = q
        return q

    def entity(self, address):
        """The entity an AMQP address names, or None."""
        addr = address or ""
        if addr.lower().endswith(MGMT_SUFFIX):
            addr = addr[:-len(MGMT_SUFFIX)]
        if addr.lower().endswith(DLQ_SUFFIX):
            q = self.queue(addr[:-len(DLQ_SUFFIX)])
            return q.dead if q else None
        return self.queue(addr)

    @staticmethod
    def scheduled(ent, seq):
        """Whether seq is a message of ent still waiting for its scheduled time."""
        s = ent.messages.get(seq)
        return s is not None and s.visible_ms > now_ms()

    # --- locks and settlement -------------------------------------------

    def lock(self, ent, s):
        s.lock = uuid.uuid4()
        s.locked_until = now_ms() + int(ent.lock_s * 1000)
        s.deliveries += 1

    def unlock(self, ent, s, count_delivery=True):
        """Make s available again, or dead-letter it past the max count."""
        s.lock, s.delivery, s.locked_until = None, None, 0
        if not count_delivery:
            s.deliveries -= 1
        elif ent.dead is not None and ent.max_delivery and s.deliveries >= ent.max_delivery:
            self.dead_letter(ent, s, "MaxDeliveryCountExceeded",
                             "Message could not be consumed after %d delivery attempts." % ent.max_delivery)

    def dead_letter_error(self, s, reason, description, props=None):
        """None, or (condition, text) saying why Azure would refuse to
        dead-letter s with this reason and description."""
        for name, text in (("DeadLetterReason", reason), ("DeadLetterErrorDescription", description)):
            if utf16_len(text) > MAX_DEAD_LETTER_TEXT:
                return NOT_ALLOWED, "%s is %d characters long; the limit is %d." % (
                    name, utf16_len(text), MAX_DEAD_LETTER_TEXT)
        m = Message()
        m.decode(s.msg.encode())
        self.mark_dead(m, reason, description, props)
        bad = header_error(m)
        if bad:
            return INTERNAL_ERROR, "The dead-lettered message's header is too large: " + bad
        size = len(m.encode())
        if size > self.args.max_message_size:
            return SIZE_EXCEEDED, "The dead-lettered message would be %d bytes; the limit is %d." % (
                size, self.args.max_message_size)
        return None

    @staticmethod
    def mark_dead(msg, reason, description, props):
        ap = dict(msg.properties or {})
        ap.update(props or {})
        ap["DeadLetterReason"] = reason or ""
        ap["DeadLetterErrorDescription"] = description or ""
        msg.properties = ap

    def dead_letter(self, ent, s, reason, description, props=None):
        """Move s to ent's dead letters. Azure keeps its sequence number and
        enqueued time there (only a scheduled message takes a new number,
        when it becomes active): https://learn.microsoft.com/azure/service-bus-messaging/message-sequencing
        and https://github.com/MicrosoftDocs/azure-docs/issues/97032."""
        del ent.messages[s.seq]
        msg = s.msg
        self.mark_dead(msg, reason, description, props)
        d = Stored(s.seq, msg, s.enqueued_ms)
        # a lock that ends by dead-lettering does not count as a delivery
        d.deliveries = s.deliveries - (1 if s.lock is not None else 0)
        ent.dead.messages[d.seq] = d

    def settle(self, ent, s, status, reason=None, description=None, props=None):
        """Apply a disposition to a locked message; returns None, or
        (condition, text) when it is refused."""
        if status == "completed":
            del ent.messages[s.seq]
        elif status == "abandoned":
            self.unlock(ent, s)
        elif status == "released":
            self.unlock(ent, s, count_delivery=False)
        elif status == "suspended":
            err = self.dead_letter_error(s, reason, description, props)
            if err is not None:
                return err  # refused: the message stays locked
            if ent.dead is None:  # dead-lettering a dead letter: just complete it
                del ent.messages[s.seq]
            else:
                self.dead_letter(ent, s, reason, description, props)
        else:
            raise ValueError("unsupported disposition %r" % status)
        return None

    def tick(self):
        """Expire locks, messages past the queue's time-to-live and
        duplicate-detection history."""
        now = now_ms()
        for q in list(self.queues.values()):
            for ent in (q, q.dead):
                for s in list(ent.messages.values()):
                    if s.lock is not None and s.locked_until <= now:
                        self.unlock(ent, s)
                self.expire(ent, now)
                for k in [k for k, exp in ent.seen_ids.items() if exp <= now]:
                    del ent.seen_ids[k]

    def expire(self, ent, now):
        """Azure drops a message (or dead-letters it, reason TTLExpiredException,
        with DeadLetteringOnMessageExpiration) that is not locked once the
        queue's DefaultMessageTimeToLive has passed since it was enqueued
        (its scheduled time, for a scheduled one); dead letters never expire.
        https://learn.microsoft.com/azure/service-bus-messaging/message-expiration"""
        if ent.ttl_s is None or ent.dead is None:
            return
        for s in list(ent.messages.values()):
            if s.lock is None and max(s.enqueued_ms, s.visible_ms) + ent.ttl_s * 1000 <= now:
                if ent.dead_on_expiry:
                    self.dead_letter(ent, s, "TTLExpiredException", "The message expired and was dead lettered.")
                else:
                    del ent.messages[s.seq]

    def wire_message(self, ent, s, with_lock):
        """The message as a receiver or a peek sees it."""
        m = s.msg
        ann = {k: v for k, v in (m.annotations or {}).items()
               if not str(k).startswith("x-opt-lock")}
        ann[symbol("x-opt-sequence-number")] = s.seq
        ann[symbol("x-opt-enqueued-time")] = timestamp(s.enqueued_ms)
        if s.visible_ms > now_ms():
            ann[symbol("x-opt-message-state")] = int32(2)
        if s.lock is not None:  # peeks show a current lock too
            ann[symbol("x-opt-locked-until")] = timestamp(s.locked_until)
        if with_lock:
            m.instructions = {symbol("x-opt-lock-token"): s.lock}
        else:
            m.instructions = None
        m.annotations = ann
        m.delivery_count = max(s.deliveries - (1 if s.lock is not None else 0), 0)
        m.durable = True  # forces a header section onto the wire
        return m


def header_error(msg):
    """None, or why Azure would refuse msg's header (its properties, with
    the system properties and annotations)."""
    for k, v in (msg.properties or {}).items():
        d = Data()
        d.put_object(k)
        d.put_object(v)
        size = len(d.encode())
        if size > MAX_PROPERTY_BYTES:
            return "The property %r is %d bytes; the limit is %d." % (str(k), size, MAX_PROPERTY_BYTES)
    body, msg.body = msg.body, None
    size = len(msg.encode())
    msg.body = body
    if size > MAX_HEADER_BYTES:
        return "The message's properties are %d bytes; the limit is %d." % (size, MAX_HEADER_BYTES)
    return None


def message_id_too_long(msg):
    """Whether msg's message-id is over Azure's 128 characters."""
    return msg.id is not None and utf16_len(str(msg.id)) > MAX_MESSAGE_ID


def array(kind, values):
    return Array(UNDESCRIBED, kind, *values)


def elements(v):
    return list(v.elements) if isinstance(v, Array) else list(v or [])


def split_batch(data):
    """The messages in data: itself, or the parts of an SDK batch.

    A batch (message format 0x80013700, which proton's Python API does not
    expose) carries each encoded message in its own data section; those
    sections start with a section descriptor (0x00 0x53), which a plain
    message's body never does in these tests.
    """
    bodies, pos = [], 0
    while pos < len(data):
        d = Data()
        pos += d.decode(data[pos:])
        d.rewind()
        d.next()
        v = d.get_object()
        if getattr(v, "descriptor", None) == 0x75:
            bodies.append(bytes(v.value))
    if bodies and all(b[:2] == b"\x00\x53" for b in bodies):
        return bodies
    return [data]


class AckLater:
    """Acknowledges a settlement the broker applied earlier (ack_delay)."""

    def __init__(self, broker, dlv, state):
        self.b, self.dlv, self.state = broker, dlv, state

    def on_timer_task(self, event):
        with self.b.mutex:
            if not self.dlv.settled:
                self.dlv.update(self.state)
                self.dlv.settle()


class Handler(FlowController):
    """The AMQP side: links, deliveries, management requests."""

    def __init__(self, broker):
        super().__init__(window=500)
        self.b = broker
        self.reply_links = {}  # reply-to address -> sender link

    # --- connection and link lifecycle ------------------------------------

    def on_connection_bound(self, event):
        sasl = event.transport.sasl()
        sasl.allowed_mechs("ANONYMOUS")
        event.transport.idle_timeout = 60.0

    def on_connection_remote_open(self, event):
        if event.connection.state & Endpoint.LOCAL_UNINIT:
            event.connection.open()

    def on_session_remote_open(self, event):
        if event.session.state & Endpoint.LOCAL_UNINIT:
            event.session.open()

    def on_link_remote_open(self, event):
        link = event.link
        if not link.state & Endpoint.LOCAL_UNINIT:
            return
        link.source.copy(link.remote_source)
        link.target.copy(link.remote_target)
        link.snd_settle_mode = link.remote_snd_settle_mode
        link.rcv_settle_mode = link.remote_rcv_settle_mode
        with self.b.mutex:
            if link.is_sender:
                src = link.remote_source.address or ""
                if src == "$cbs" or src.lower().endswith(MGMT_SUFFIX):
                    # management replies (a peek of a 256 KiB message) are larger
                    self.reply_links[link.remote_target.address] = link
                    link.open()
                    return
                ent = self.b.entity(src)
            else:
                tgt = link.remote_target.address or ""
                ent = None if tgt == "$cbs" else self.b.entity(tgt)
                if tgt == "$cbs":
                    link.open()
                    return
            if ent is None:
                link.open()
                link.condition = Condition("amqp:not-found",
                                           "The messaging entity '%s' could not be found." %
                                           (link.remote_source.address if link.is_sender else link.remote_target.address))
                link.close()
                return
            link.max_message_size = self.b.args.max_message_size  # the SDK sizes batches by it
            link.open()
            if link.is_sender:
                ent.links.append(link)
                link.entity = ent
            self.pump(ent)

    def on_link_remote_close(self, event):
        self.forget(event.link)
        if not event.link.state & Endpoint.LOCAL_CLOSED:
            event.link.close()

    def on_session_remote_close(self, event):
        if not event.session.state & Endpoint.LOCAL_CLOSED:
            event.session.close()

    def on_connection_remote_close(self, event):
        if not event.connection.state & Endpoint.LOCAL_CLOSED:
            event.connection.close()

    def on_transport_closed(self, event):
        conn = event.connection
        if conn is None:
            return
        link = conn.link_head(0)
        while link:
            self.forget(link)
            link = link.next(0)

    def forget(self, link):
        with self.b.mutex:
            ent = getattr(link, "entity", None)
            if ent is not None and link in ent.links:
                ent.links.remove(link)
            for k in [k for k, v in self.reply_links.items() if v is link]:
                del self.reply_links[k]

    # --- flow ---------------------------------------------------------------

    def on_link_flow(self, event):
        super().on_link_flow(event)
        link = event.link
        ent = getattr(link, "entity", None)
        if link.is_sender and ent is not None:
            with self.b.mutex:
                self.pump(ent)
            if link.drain_mode:
                link.drained()

    def pump(self, ent):
        """Deliver available messages to receivers that have credit."""
        for link in list(ent.links):
            if link.state & Endpoint.LOCAL_CLOSED:
                continue
            while link.credit > 0:
                s = ent.next_available()
                if s is None:
                    return
                if link.snd_settle_mode == Link.SND_SETTLED:  # receive-and-delete
                    m = self.b.wire_message(ent, s, with_lock=False)
                    del ent.messages[s.seq]
                    dlv = link.delivery(str(s.seq))
                    link.send(m.encode())
                    dlv.settle()
                    continue
                self.b.lock(ent, s)
                m = self.b.wire_message(ent, s, with_lock=True)
                dlv = link.delivery(str(s.lock))
                dlv.stored = (ent, s.seq, s.lock)
                s.delivery = dlv
                link.send(m.encode())
                link.advance()
                if ent.detach_after > 0:
                    ent.detach_after -= 1
                    if ent.detach_after == 0:  # fault: detach mid-receive
                        link.condition = Condition("amqp:link:detach-forced",
                                                   "The link was detached by the emulator's fault switch.")
                        link.close()
                        if link in ent.links:
                            ent.links.remove(link)
                        break

    def pump_all(self):
        for q in list(self.b.queues.values()):
            self.pump(q)
            self.pump(q.dead)

    def on_timer_task(self, event):
        with self.b.mutex:
            self.b.tick()
            self.pump_all()
        event.container.schedule(0.05, self)

    # --- deliveries ---------------------------------------------------------

    def on_delivery(self, event):
        super().on_delivery(event)
        try:
            self.delivery(event)
        except Exception:  # report, never take the emulator down
            traceback.print_exc()

    def delivery(self, event):
        dlv = event.delivery
        link = dlv.link
        with self.b.mutex:
            if link.is_receiver:
                if dlv.readable and not dlv.partial:
                    data = link.recv(dlv.pending)
                    link.advance()
                    self.incoming(link, dlv, data)
            elif dlv.updated and not dlv.settled and hasattr(dlv, "stored"):
                self.client_disposition(dlv, event.container)
            elif dlv.settled and hasattr(dlv, "stored"):
                self.client_disposition(dlv, event.container)
                dlv.settle()
            self.pump_all()

    def incoming(self, link, dlv, data):
        tgt = link.remote_target.address or ""
        if tgt == "$cbs" or tgt.lower().endswith(MGMT_SUFFIX):
            msg = Message()
            msg.decode(data)
            self.request(tgt, msg)
        else:
            ent = self.b.entity(tgt)
            if len(data) > self.b.args.max_message_size:
                dlv.local.condition = Condition(SIZE_EXCEEDED, "The message is %d bytes; the limit is %d." % (
                    len(data), self.b.args.max_message_size))
                dlv.update(Delivery.REJECTED)
                dlv.settle()
                return
            msgs = []
            for part in split_batch(data):
                msg = Message()
                msg.decode(part)
                if message_id_too_long(msg):
                    dlv.local.condition = Condition(NOT_ALLOWED, "The message id is %d characters long; the limit is %d." % (
                        utf16_len(str(msg.id)), MAX_MESSAGE_ID))
                    dlv.update(Delivery.REJECTED)
                    dlv.settle()
                    return
                bad = header_error(msg)
                if bad:
                    dlv.local.condition = Condition(INTERNAL_ERROR, "The service was unable to process the request; please retry the operation. " + bad)
                    dlv.update(Delivery.REJECTED)
                    dlv.settle()
                    return
                msgs.append(msg)
            for msg in msgs:
                at = (msg.annotations or {}).get("x-opt-scheduled-enqueue-time")
                ent.add(msg, int(at) if at else 0)
        dlv.update(Delivery.ACCEPTED)
        dlv.settle()

    def client_disposition(self, dlv, container):
        """A receiver settled a peek-locked delivery on its link."""
        ent, seq, token = dlv.stored
        del dlv.stored
        s = ent.messages.get(seq)
        state = dlv.remote_state
        ok = s is not None and s.lock == token and s.locked_until > now_ms()
        if not ok:
            if state != Delivery.RELEASED:
                dlv.local.condition = Condition(LOCK_LOST, "The lock supplied is invalid. Either the lock expired, or the message has already been removed from the queue.")
                dlv.update(Delivery.REJECTED)
            dlv.settle()
            return
        err = None
        if state == Delivery.ACCEPTED:
            self.b.settle(ent, s, "completed")
        elif state == Delivery.REJECTED:
            info = dict((dlv.remote.condition.info or {}) if dlv.remote.condition else {})
            reason = info.pop("DeadLetterReason", "")
            desc = info.pop("DeadLetterErrorDescription", "")
            err = self.b.settle(ent, s, "suspended", reason, desc, info)
        elif state == Delivery.MODIFIED:
            self.b.settle(ent, s, "abandoned")
        else:  # RELEASED
            self.b.settle(ent, s, "released")
        if err is not None:
            # refused: the message stays locked, to be settled again by lock token
            dlv.local.condition = Condition(*err)
            dlv.update(Delivery.REJECTED)
            dlv.settle()
            return
        if ent.drop_acks > 0:  # fault: applied, never acknowledged
            ent.drop_acks -= 1
            return
        if ent.ack_delay > 0:  # fault: applied now, acknowledged later
            container.schedule(ent.ack_delay, AckLater(self.b, dlv, state))
            return
        dlv.update(state)
        dlv.settle()

    # --- management ---------------------------------------------------------

    def request(self, address, req):
        ap = req.properties or {}
        op = ap.get("operation", "")
        refusal = ()
        try:
            if address == "$cbs":
                code, body = 200, None  # put-token: every token is good
            else:
                ent = self.b.entity(address)
                fn = getattr(self, "op_" + op.replace("com.microsoft:", "").replace("-", "_"), None)
                if ent is None:
                    code, body = 404, None
                elif fn is None:
                    code, body = 501, None
                else:
                    code, body, *refusal = fn(ent, req.body or {})
        except Exception as e:  # report, never crash the emulator
            print("sbemu: %s failed: %r" % (op, e), file=sys.stderr)
            code, body = 500, None
        link = self.reply_links.get(req.reply_to)
        if link is None:
            return
        status = {200: "OK", 204: "No Content", 400: "Bad Request", 404: "Not Found", 410: "Gone", 413: "Request Entity Too Large",
                  500: "Internal Error", 501: "Not Implemented"}.get(code, "")
        props = {"statusCode": int32(code), "statusDescription": status}
        if refusal:  # (condition, description), as Azure words a refusal
            props["errorCondition"] = symbol(refusal[0])
            props["statusDescription"] = refusal[1]
        rsp = Message(body=body, correlation_id=req.id, address=req.reply_to, properties=props)
        link.send(rsp).settle()

    def op_renew_lock(self, ent, body):
        tokens = elements(body.get("lock-tokens"))
        stored = [ent.by_lock(t) for t in tokens]
        if any(s is None for s in stored):
            return 410, None
        for s in stored:
            s.locked_until = now_ms() + int(ent.lock_s * 1000)
        return 200, {"expirations": array(Data.TIMESTAMP, [timestamp(s.locked_until) for s in stored])}

    def op_update_disposition(self, ent, body):
        tokens = elements(body.get("lock-tokens"))
        stored = [ent.by_lock(t) for t in tokens]
        if any(s is None for s in stored):
            return 410, None
        for s in stored:
            err = self.b.settle(ent, s, body.get("disposition-status"), body.get("deadletter-reason"),
                                body.get("deadletter-description"), body.get("properties-to-modify"))
            if err is not None:
                return 400, None
        return 200, None

    def op_schedule_message(self, ent, body):
        seqs, msgs = [], []
        for item in elements(body.get("messages")):
            if len(item["message"]) > self.b.args.max_message_size:
                return 413, None
            msg = Message()
            msg.decode(item["message"])
            if message_id_too_long(msg):
                return 400, None
            bad = header_error(msg)
            if bad:
                return 500, None, INTERNAL_ERROR, "The service was unable to process the request; please retry the operation. " + bad
            msgs.append(msg)
        for msg in msgs:
            at = (msg.annotations or {}).get("x-opt-scheduled-enqueue-time")
            seq = ent.add(msg, int(at) if at else 0)
            seqs.append(seq if seq is not None else 0)
        return 200, {"sequence-numbers": array(Data.LONG, seqs)}

    def op_cancel_scheduled_message(self, ent, body):
        # Azure refuses to cancel a sequence number that is not a scheduled
        # message (never was, already canceled, or already enqueued: a
        # scheduled message takes a new sequence number when it becomes
        # active) with "Messages not found. Missing sequence numbers: N"
        # (MessageNotFound). Sources: https://learn.microsoft.com/azure/service-bus-messaging/message-sequencing
        # and https://github.com/Azure/azure-service-bus/issues/239. The
        # emulator cancels none of the request's messages when one is missing.
        seqs = [int(seq) for seq in elements(body.get("sequence-numbers"))]
        missing = [seq for seq in seqs if not self.b.scheduled(ent, seq)]
        if missing:
            return 404, None, MESSAGE_NOT_FOUND, "Messages not found. Missing sequence numbers: %s" % ", ".join(
                str(seq) for seq in missing)
        for seq in seqs:
            del ent.messages[seq]
        return 200, None

    def op_peek_message(self, ent, body):
        start = int(body.get("from-sequence-number", 0))
        # Azure returns at most 250 messages per peek, however many are
        # asked for (azure-sdk-for-python#26643): clients must page.
        count = min(int(body.get("message-count", 1)), PEEK_LIMIT)
        found = ent.messages.from_seq(start, count)
        if not found:
            return 204, None
        out = []
        for s in found:
            m = self.b.wire_message(ent, s, with_lock=False)
            out.append({"message": m.encode()})
        return 200, {"messages": out}


class Admin(http.server.BaseHTTPRequestHandler):
    """The ATOM endpoint the admin client reads (plain HTTP)."""

    broker = None

    def log_message(self, *args):
        pass

    def queue_name(self):
        from urllib.parse import unquote
        path = unquote(self.path.split("?", 1)[0])
        return path[1:] if path.startswith("/") else path

    def do_GET(self):
        with self.broker.mutex:
            q = self.broker.queue(self.queue_name(), create=False)
            if q is None:
                return self.reply(404, "<Error><Code>404</Code><Detail>queue not found</Detail></Error>")
            self.reply(200, self.entry(q))

    def do_PUT(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
        name = self.queue_name()
        with self.broker.mutex:
            existing = self.broker.queue(name, create=False)
            exists = existing is not None
            if exists and self.headers.get("If-Match") != "*":
                return self.reply(409, "<Error><Code>409</Code><Detail>queue exists</Detail></Error>")

            def field(tag, default, conv):
                m = re.search(r"<(?:\w+:)?%s>([^<]*)<" % tag, body)
                return conv(m.group(1)) if m else default

            if not exists:
                bad = check_queue_name(name)
                if bad:
                    return self.reply(400, "<Error><Code>400</Code><Detail>%s</Detail></Error>" % escape(bad))
            meta = field("UserMetadata", None, html.unescape)
            bad = check_user_metadata(meta)
            if bad:
                return self.reply(400, "<Error><Code>400</Code><Detail>%s</Detail></Error>" % escape(bad))
            if exists:
                # An update (If-Match: *) keeps the messages; only the user
                # metadata is applied (jobq keeps queue policies there).
                existing.user_metadata = meta
                return self.reply(200, self.entry(existing))

            # Azure's defaults for what the request leaves out: a 1-minute
            # lock, 10 deliveries, no duplicate detection.
            lock_s = field("LockDuration", 60.0, parse_iso_duration)
            maxd = field("MaxDeliveryCount", 10, int)
            dd = field("RequiresDuplicateDetection", False, lambda v: v == "true")
            window = field("DuplicateDetectionHistoryTimeWindow", 600.0, parse_iso_duration)
            bad = check_queue_settings(lock_s, maxd, window if dd else 0)
            if bad:
                return self.reply(400, "<Error><Code>400</Code><Detail>%s</Detail></Error>" % escape(bad))
            q = self.broker.create(name, lock_s, maxd, window if dd else 0)
            q.user_metadata = meta
            q.ttl_s = field("DefaultMessageTimeToLive", None, parse_iso_duration)
            if q.ttl_s is not None and q.ttl_s >= MAX_TTL_S:
                q.ttl_s = None
            q.dead_on_expiry = field("DeadLetteringOnMessageExpiration", False, lambda v: v == "true")
            q.requires_session = field("RequiresSession", False, lambda v: v == "true")
            self.reply(201, self.entry(q))

    def do_POST(self):
        """Sets a queue's fault switches: /$emulator/faults/QUEUE?drop_acks=N
        &ack_delay=SECONDS&detach_after=N (each given one replaces the old);
        QUEUE/$DeadLetterQueue sets its dead-letter sub-queue's."""
        path, _, query = self.path.partition("?")
        prefix = "/$emulator/faults/"
        if not path.startswith(prefix):
            return self.reply(404, "<Error><Code>404</Code><Detail>unknown path</Detail></Error>")
        from urllib.parse import parse_qs, unquote
        args = {k: v[-1] for k, v in parse_qs(query).items()}
        with self.broker.mutex:
            name = unquote(path[len(prefix):])
            dead = name.lower().endswith(DLQ_SUFFIX)  # QUEUE/$DeadLetterQueue: its settlements
            q = self.broker.queue(name[:-len(DLQ_SUFFIX)] if dead else name, create=False)
            if q is not None and dead:
                q = q.dead
            if q is None:
                return self.reply(404, "<Error><Code>404</Code><Detail>queue not found</Detail></Error>")
            try:
                if "drop_acks" in args:
                    q.drop_acks = int(args["drop_acks"])
                if "ack_delay" in args:
                    q.ack_delay = float(args["ack_delay"])
                if "detach_after" in args:
                    q.detach_after = int(args["detach_after"])
            except ValueError as e:
                return self.reply(400, "<Error><Code>400</Code><Detail>%s</Detail></Error>" % escape(str(e)))
        self.reply(200, "<Faults/>")

    def reply(self, code, xml):
        data = xml.encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/atom+xml;type=entry;charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    @staticmethod
    def entry(q):
        active, scheduled = q.counts()
        dead = len(q.dead.messages)
        return (
            '<entry xmlns="http://www.w3.org/2005/Atom"><title type="text">%s</title>'
            '<content type="application/xml"><QueueDescription '
            'xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" '
            'xmlns:i="http://www.w3.org/2001/XMLSchema-instance">'
            '<LockDuration>%s</LockDuration><MaxSizeInMegabytes>1024</MaxSizeInMegabytes>'
            '<RequiresDuplicateDetection>%s</RequiresDuplicateDetection>'
            '<RequiresSession>%s</RequiresSession>'
            '<DefaultMessageTimeToLive>%s</DefaultMessageTimeToLive>'
            '<DeadLetteringOnMessageExpiration>%s</DeadLetteringOnMessageExpiration>'
            '<DuplicateDetectionHistoryTimeWindow>%s</DuplicateDetectionHistoryTimeWindow>'
            '<MaxDeliveryCount>%d</MaxDeliveryCount><EnableBatchedOperations>true</EnableBatchedOperations>'
            '<SizeInBytes>0</SizeInBytes><MessageCount>%d</MessageCount><Status>Active</Status>'
            '<CreatedAt>%s</CreatedAt><UpdatedAt>%s</UpdatedAt><AccessedAt>%s</AccessedAt>'
            '<CountDetails xmlns:d2p1="http://schemas.microsoft.com/netservices/2011/06/servicebus">'
            '<d2p1:ActiveMessageCount>%d</d2p1:ActiveMessageCount>'
            '<d2p1:DeadLetterMessageCount>%d</d2p1:DeadLetterMessageCount>'
            '<d2p1:ScheduledMessageCount>%d</d2p1:ScheduledMessageCount>'
            '<d2p1:TransferMessageCount>0</d2p1:TransferMessageCount>'
            '<d2p1:TransferDeadLetterMessageCount>0</d2p1:TransferDeadLetterMessageCount>'
            '</CountDetails><EnablePartitioning>false</EnablePartitioning>%s</QueueDescription>'
            '</content></entry>') % (
                escape(q.name), iso_duration(q.lock_s), "true" if q.dedup_s > 0 else "false",
                "true" if q.requires_session else "false",
                "P10675199DT2H48M5.4775807S" if q.ttl_s is None else iso_duration(q.ttl_s),
                "true" if q.dead_on_expiry else "false",
                iso_duration(q.dedup_s or 600), q.max_delivery, active + scheduled + dead,
                q.created, q.created, q.created, active, dead, scheduled,
                "<UserMetadata>%s</UserMetadata>" % escape(q.user_metadata)
                if getattr(q, "user_metadata", None) else "")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="AMQP port; 0 picks a free one")
    p.add_argument("--admin-port", type=int, default=0, help="HTTP (ATOM) port; 0 picks a free one")
    p.add_argument("--queue", action="append", default=[], help="create this queue at start (repeatable)")
    p.add_argument("--no-auto-create", dest="auto_create", action="store_false",
                   help="unknown queues are not-found instead of created on first use")
    p.add_argument("--lock-duration", type=float, default=60.0, help="lock duration in seconds, 5 to 300 (default 60)")
    p.add_argument("--max-delivery-count", type=int, default=10, help="deliveries before dead-lettering (default 10)")
    p.add_argument("--clock-offset", type=float, default=0.0,
                   help="seconds the broker's clock is ahead of the real one (negative: behind)")
    p.add_argument("--max-message-size", type=int, default=262144,
                   help="largest message in bytes, announced on every link (default 256 KiB, the standard tier's)")
    p.add_argument("--duplicate-detection-window", type=float, default=0.0,
                   help="duplicate detection history in seconds of the queues created on first use; "
                        "0 (the default, as Azure) disables it")
    args = p.parse_args()
    bad = check_queue_settings(args.lock_duration, args.max_delivery_count, args.duplicate_detection_window)
    if bad:
        p.error(bad)
    global CLOCK_OFFSET_MS
    CLOCK_OFFSET_MS = int(args.clock_offset * 1000)

    broker = Broker(args)
    for name in args.queue:
        broker.create(name, args.lock_duration, args.max_delivery_count, args.duplicate_detection_window)

    Admin.broker = broker
    httpd = http.server.ThreadingHTTPServer((args.host, args.admin_port), Admin)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()

    handler = Handler(broker)
    container = Container(handler)
    port = args.port
    if port == 0:  # find a free port; proton's acceptor does not report it
        import socket
        with socket.socket() as s:
            s.bind((args.host, 0))
            port = s.getsockname()[1]
    container.listen("%s:%d" % (args.host, port))
    container.schedule(0.05, handler)
    print("READY amqp=%d admin=%d" % (port, httpd.server_address[1]), flush=True)
    container.run()


if __name__ == "__main__":
    main()
