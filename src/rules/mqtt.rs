//! The MQTT converters `mqtt_is_valid` and `mqtt_field_value(TYPE,FIELD)`, as haproxy 2.6
//! reads a packet (its `src/mqtt.c`, read for behaviour). Only the first packet of each side
//! can be inspected (`req.payload(0,0)` / `res.payload(0,0)`), so only CONNECT (MQTT 3.1,
//! 3.1.1, 5.0) and CONNACK (3.1.1, 5.0) are parsed; every other packet type is invalid.
//!
//! A packet is a fixed header (type and flags in one byte, then the remaining length as a
//! variable byte integer of at most 4 bytes), a variable header and a payload. Fewer than two
//! bytes, or fewer bytes than the remaining length announces, is "need more data": no value,
//! so a `tcp-request content` condition stays undecided within its inspect delay. The parse
//! then runs over everything buffered (not only the announced length) and must have consumed
//! exactly the remaining length: haproxy's quirks (a CONNACK is 3.1.1 when exactly two bytes
//! follow its fixed header, an unknown CONNACK property is "need more data") are kept, since
//! a configuration must decide as it did under haproxy.

/// The packet types, by their number on the wire (haproxy's `MQTT_CPT_*`).
const CONNECT: u8 = 1;
const CONNACK: u8 = 2;
const PUBLISH: u8 = 3;
const PUBREL: u8 = 6;
const SUBSCRIBE: u8 = 8;
const UNSUBSCRIBE: u8 = 10;
/// One past the last type (AUTH is 15).
const TYPES: u8 = 16;

const V3_1: u8 = 3;
const V3_1_1: u8 = 4;
const V5_0: u8 = 5;

/// CONNECT flags.
const FL_RESERVED: u8 = 0x01;
const FL_WILL: u8 = 0x04;
const FL_WILL_QOS: u8 = 0x18;
const FL_WILL_RETAIN: u8 = 0x20;
const FL_PASSWORD: u8 = 0x40;
const FL_USERNAME: u8 = 0x80;

/// What `mqtt_is_valid` finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Validity {
    Valid,
    Invalid,
    NeedMore,
}

/// What `mqtt_field_value` finds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldValue<'a> {
    /// A string field as the packet has it.
    Bytes(&'a [u8]),
    /// An integer field, printed in decimal.
    Int(u32),
    /// Not this packet type, an invalid packet, an absent or empty field.
    NotFound,
    NeedMore,
}

/// The fields `mqtt_field_value` can name, in haproxy's order (`MQTT_FN_*`): the first ten by
/// name, then the MQTT 5.0 properties by identifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Field {
    Flags = 1,
    ReasonCode,
    ProtocolName,
    ProtocolVersion,
    ClientIdentifier,
    WillTopic,
    WillPayload,
    Username,
    Password,
    Keepalive,
    PayloadFormatIndicator,
    MessageExpiryInterval,
    ContentType,
    ResponseTopic,
    CorrelationData,
    SubscriptionIdentifier,
    SessionExpiryInterval,
    AssignedClientIdentifier,
    ServerKeepalive,
    AuthenticationMethod,
    AuthenticationData,
    RequestProblemInformation,
    DelayInterval,
    RequestResponseInformation,
    ResponseInformation,
    ServerReference,
    ReasonString,
    ReceiveMaximum,
    TopicAliasMaximum,
    TopicAlias,
    MaximumQos,
    RetainAvailable,
    UserProperty,
    MaximumPacketSize,
    WildcardSubscriptionAvailable,
    SubscriptionIdentifiersAvailable,
    SharedSubscriptionAvailable,
}

/// Each field's name in `mqtt_field_value`'s second argument (matched without case).
const FIELDS: &[(&str, Field)] = {
    use Field::*;
    &[
        ("flags", Flags),
        ("reason_code", ReasonCode),
        ("protocol_name", ProtocolName),
        ("protocol_version", ProtocolVersion),
        ("client_identifier", ClientIdentifier),
        ("will_topic", WillTopic),
        ("will_payload", WillPayload),
        ("username", Username),
        ("password", Password),
        ("keepalive", Keepalive),
        ("1", PayloadFormatIndicator),
        ("2", MessageExpiryInterval),
        ("3", ContentType),
        ("8", ResponseTopic),
        ("9", CorrelationData),
        ("11", SubscriptionIdentifier),
        ("17", SessionExpiryInterval),
        ("18", AssignedClientIdentifier),
        ("19", ServerKeepalive),
        ("21", AuthenticationMethod),
        ("22", AuthenticationData),
        ("23", RequestProblemInformation),
        ("24", DelayInterval),
        ("25", RequestResponseInformation),
        ("26", ResponseInformation),
        ("28", ServerReference),
        ("31", ReasonString),
        ("33", ReceiveMaximum),
        ("34", TopicAliasMaximum),
        ("35", TopicAlias),
        ("36", MaximumQos),
        ("37", RetainAvailable),
        ("38", UserProperty),
        ("39", MaximumPacketSize),
        ("40", WildcardSubscriptionAvailable),
        ("41", SubscriptionIdentifiersAvailable),
        ("42", SharedSubscriptionAvailable),
    ]
};

/// The fields haproxy accepts for a packet type (`mqtt_fields_per_packet`): a configuration
/// naming another is refused at load, even for types it can never parse.
fn fields_of(packet: u8) -> &'static [Field] {
    use Field::*;
    match packet {
        CONNECT => &[
            ProtocolName,
            ProtocolVersion,
            Flags,
            Keepalive,
            SessionExpiryInterval,
            ReceiveMaximum,
            MaximumPacketSize,
            TopicAliasMaximum,
            RequestResponseInformation,
            RequestProblemInformation,
            UserProperty,
            AuthenticationMethod,
            AuthenticationData,
            ClientIdentifier,
            DelayInterval,
            PayloadFormatIndicator,
            MessageExpiryInterval,
            ContentType,
            ResponseTopic,
            CorrelationData,
            WillTopic,
            WillPayload,
            Username,
            Password,
        ],
        CONNACK => &[
            Flags,
            ProtocolVersion,
            ReasonCode,
            SessionExpiryInterval,
            ReceiveMaximum,
            MaximumQos,
            RetainAvailable,
            MaximumPacketSize,
            AssignedClientIdentifier,
            TopicAliasMaximum,
            ReasonString,
            WildcardSubscriptionAvailable,
            SubscriptionIdentifiersAvailable,
            SharedSubscriptionAvailable,
            ServerKeepalive,
            ResponseInformation,
            ServerReference,
            UserProperty,
            AuthenticationMethod,
            AuthenticationData,
        ],
        PUBLISH => &[
            PayloadFormatIndicator,
            MessageExpiryInterval,
            ContentType,
            ResponseTopic,
            CorrelationData,
            SubscriptionIdentifier,
            TopicAlias,
            UserProperty,
        ],
        4..=7 => &[ReasonCode, ReasonString, UserProperty],
        SUBSCRIBE => &[SubscriptionIdentifier, UserProperty],
        9 | 11 => &[ReasonString, UserProperty],
        UNSUBSCRIBE => &[UserProperty],
        14 => &[
            ReasonCode,
            SessionExpiryInterval,
            ServerReference,
            ReasonString,
            UserProperty,
        ],
        15 => &[
            AuthenticationMethod,
            AuthenticationData,
            ReasonString,
            UserProperty,
        ],
        _ => &[],
    }
}

/// The packet type named in `mqtt_field_value`'s first argument: a number from 1 to 15 or a
/// name (any case). haproxy reads the number without checking for digits (every byte counts
/// as `byte - '0'`, wrapping), which this keeps.
pub fn packet_type(s: &str) -> Option<u8> {
    let n = s.bytes().fold(0u32, |i, c| {
        i.wrapping_mul(10)
            .wrapping_sub(u32::from(b'0'))
            .wrapping_add(u32::from(c))
    });
    if (1..u32::from(TYPES)).contains(&n) {
        return u8::try_from(n).ok();
    }
    const NAMES: [&str; 15] = [
        "CONNECT",
        "CONNACK",
        "PUBLISH",
        "PUBACK",
        "PUBREC",
        "PUBREL",
        "PUBCOMP",
        "SUBSCRIBE",
        "SUBACK",
        "UNSUBSCRIBE",
        "UNSUBACK",
        "PINGREQ",
        "PINGRESP",
        "DISCONNECT",
        "AUTH",
    ];
    let i = NAMES.iter().position(|n| n.eq_ignore_ascii_case(s))?;
    u8::try_from(i + 1).ok()
}

/// The field named in `mqtt_field_value`'s second argument, if `packet` has it.
pub fn field(packet: u8, name: &str) -> Option<Field> {
    let f = FIELDS.iter().find(|(n, _)| n.eq_ignore_ascii_case(name))?.1;
    fields_of(packet).contains(&f).then_some(f)
}

/// The flags a fixed header must carry for each type (PUBLISH's are checked by value later).
fn expected_flags(packet: u8) -> u8 {
    match packet {
        PUBLISH => 0x0F,
        PUBREL | SUBSCRIBE | UNSUBSCRIBE => 0x02,
        _ => 0x00,
    }
}

/// A cursor over a packet: each read fails (`None`) when the bytes run out.
#[derive(Clone, Copy)]
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }

    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }

    fn u16(&mut self) -> Option<u16> {
        let b = self.take(2)?;
        Some(u16::from_be_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> Option<u32> {
        let b = self.take(4)?;
        Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A variable byte integer: 7 bits a byte, low first, at most 4 bytes. Running out of
    /// bytes mid-way keeps what was read (the length check that follows asks for more).
    fn varint(&mut self) -> Option<u32> {
        let mut v: u32 = 0;
        for i in 0..4 {
            let Some(b) = self.u8() else {
                return Some(v);
            };
            v = v.wrapping_add(u32::from(b & 0x7f) << (7 * i));
            if b <= 127 {
                return Some(v);
            }
        }
        None
    }

    /// A string: a two-byte length, then the bytes.
    fn string(&mut self) -> Option<&'a [u8]> {
        let n = self.u16()?;
        self.take(usize::from(n))
    }

    /// MQTT 5.0 properties: their length as a variable byte integer, then the bytes.
    fn properties(&mut self) -> Option<Reader<'a>> {
        let n = self.varint()?;
        Some(Reader(self.take(usize::try_from(n).ok()?)?))
    }
}

/// A property may appear once (user properties excepted).
fn once(seen: &mut u64, id: u8) -> Option<()> {
    let bit = 1u64 << (id & 63);
    if *seen & bit != 0 {
        return None;
    }
    *seen |= bit;
    Some(())
}

/// A property value that is 0 or 1.
fn bool_prop(v: u8) -> Option<u8> {
    (v <= 1).then_some(v)
}

/// A parsed CONNECT (fields absent from the packet are zero or empty, as haproxy leaves them).
#[derive(Debug, Default)]
struct Connect<'a> {
    protocol_name: &'a [u8],
    protocol_version: u8,
    flags: u8,
    keepalive: u16,
    session_expiry_interval: u32,
    receive_maximum: u16,
    maximum_packet_size: u32,
    topic_alias_maximum: u16,
    request_response_information: u8,
    request_problem_information: u8,
    authentication_method: &'a [u8],
    authentication_data: &'a [u8],
    client_identifier: &'a [u8],
    delay_interval: u32,
    payload_format_indicator: u8,
    message_expiry_interval: u32,
    content_type: &'a [u8],
    response_topic: &'a [u8],
    correlation_data: &'a [u8],
    will_topic: &'a [u8],
    will_payload: &'a [u8],
    username: &'a [u8],
    password: &'a [u8],
}

/// A parsed CONNACK.
#[derive(Debug, Default)]
struct Connack<'a> {
    protocol_version: u8,
    flags: u8,
    reason_code: u8,
    session_expiry_interval: u32,
    receive_maximum: u16,
    maximum_qos: u8,
    retain_available: u8,
    maximum_packet_size: u32,
    assigned_client_identifier: &'a [u8],
    topic_alias_maximum: u16,
    reason_string: &'a [u8],
    wildcard_subscription_available: u8,
    subscription_identifiers_available: u8,
    shared_subscription_available: u8,
    server_keepalive: u16,
    response_information: &'a [u8],
    server_reference: &'a [u8],
    authentication_method: &'a [u8],
    authentication_data: &'a [u8],
}

#[derive(Debug)]
enum Packet<'a> {
    Connect(Box<Connect<'a>>),
    Connack(Box<Connack<'a>>),
}

/// How a packet parse ends short of a packet.
enum Stop {
    Invalid,
    NeedMore,
}

/// The CONNECT after its fixed header (`r` holds every byte buffered after it).
fn parse_connect(mut r: Reader<'_>, remaining: u32) -> Option<Connect<'_>> {
    let start = r.0.len();
    let mut c = Connect {
        protocol_name: r.string()?,
        ..Connect::default()
    };
    if !c.protocol_name.eq_ignore_ascii_case(b"MQTT")
        && !c.protocol_name.eq_ignore_ascii_case(b"MQIsdp")
    {
        return None;
    }
    c.protocol_version = r.u8()?;
    if ![V3_1, V3_1_1, V5_0].contains(&c.protocol_version) {
        return None;
    }
    c.flags = r.u8()?;
    if c.flags & FL_RESERVED != 0 {
        return None;
    }
    // A will QoS needs the will flag (haproxy refuses only QoS 3 without it).
    if c.flags & (FL_WILL | FL_WILL_QOS | FL_WILL_RETAIN) == FL_WILL_QOS {
        return None;
    }
    c.keepalive = r.u16()?;
    if c.protocol_version == V5_0 {
        let mut p = r.properties()?;
        let mut seen = 0u64;
        while let Some(id) = p.u8() {
            match id {
                0x11 => {
                    once(&mut seen, id)?;
                    c.session_expiry_interval = p.u32()?;
                }
                0x21 => {
                    once(&mut seen, id)?;
                    c.receive_maximum = p.u16().filter(|&v| v != 0)?;
                }
                0x27 => {
                    once(&mut seen, id)?;
                    c.maximum_packet_size = p.u32().filter(|&v| v != 0)?;
                }
                0x22 => {
                    once(&mut seen, id)?;
                    c.topic_alias_maximum = p.u16()?;
                }
                0x19 => {
                    once(&mut seen, id)?;
                    c.request_response_information = bool_prop(p.u8()?)?;
                }
                0x17 => {
                    once(&mut seen, id)?;
                    c.request_problem_information = bool_prop(p.u8()?)?;
                }
                0x26 => {
                    p.string()?;
                    p.string()?;
                }
                0x15 => {
                    once(&mut seen, id)?;
                    c.authentication_method = p.string()?;
                }
                0x16 => {
                    once(&mut seen, id)?;
                    c.authentication_data = p.string()?;
                }
                _ => return None,
            }
        }
    }
    if c.authentication_method.is_empty() && !c.authentication_data.is_empty() {
        return None;
    }
    c.client_identifier = r.string()?;
    if c.protocol_version == V5_0 && c.flags & FL_WILL != 0 {
        let mut p = r.properties()?;
        let mut seen = 0u64;
        while let Some(id) = p.u8() {
            match id {
                0x18 => {
                    once(&mut seen, id)?;
                    c.delay_interval = p.u32()?;
                }
                0x01 => {
                    once(&mut seen, id)?;
                    c.payload_format_indicator = bool_prop(p.u8()?)?;
                }
                0x02 => {
                    once(&mut seen, id)?;
                    c.message_expiry_interval = p.u32()?;
                }
                0x03 => {
                    once(&mut seen, id)?;
                    c.content_type = p.string()?;
                }
                0x08 => {
                    once(&mut seen, id)?;
                    c.response_topic = p.string()?;
                }
                0x09 => {
                    once(&mut seen, id)?;
                    c.correlation_data = p.string()?;
                }
                0x26 => {
                    p.string()?;
                    p.string()?;
                }
                _ => return None,
            }
        }
    }
    if c.flags & FL_WILL != 0 {
        c.will_topic = r.string()?;
        c.will_payload = r.string()?;
    }
    if c.flags & FL_USERNAME != 0 {
        c.username = r.string()?;
    }
    if c.flags & FL_PASSWORD != 0 {
        c.password = r.string()?;
    }
    (start - r.0.len() == remaining as usize).then_some(c)
}

/// The CONNACK after its fixed header. An unknown property is "need more data" in haproxy.
fn parse_connack(mut r: Reader<'_>, remaining: u32) -> Result<Connack<'_>, Stop> {
    let start = r.0.len();
    let mut c = Connack {
        // 3.1.1 when exactly two bytes are buffered after the fixed header.
        protocol_version: match start {
            0 | 1 => return Err(Stop::Invalid),
            2 => V3_1_1,
            _ => V5_0,
        },
        ..Connack::default()
    };
    // Bits 7 to 1 are reserved.
    c.flags = r.u8().filter(|f| f & 0xfe == 0).ok_or(Stop::Invalid)?;
    c.reason_code = r.u8().ok_or(Stop::Invalid)?;
    if c.protocol_version == V5_0 {
        let mut p = r.properties().ok_or(Stop::Invalid)?;
        let mut seen = 0u64;
        while let Some(id) = p.u8() {
            let known: Option<()> = (|| {
                match id {
                    0x11 => {
                        once(&mut seen, id)?;
                        c.session_expiry_interval = p.u32()?;
                    }
                    0x21 => {
                        once(&mut seen, id)?;
                        c.receive_maximum = p.u16().filter(|&v| v != 0)?;
                    }
                    0x24 => {
                        once(&mut seen, id)?;
                        c.maximum_qos = bool_prop(p.u8()?)?;
                    }
                    0x25 => {
                        once(&mut seen, id)?;
                        c.retain_available = bool_prop(p.u8()?)?;
                    }
                    0x27 => {
                        once(&mut seen, id)?;
                        c.maximum_packet_size = p.u32().filter(|&v| v != 0)?;
                    }
                    0x12 => {
                        once(&mut seen, id)?;
                        c.assigned_client_identifier = p.string().filter(|s| !s.is_empty())?;
                    }
                    0x22 => {
                        once(&mut seen, id)?;
                        c.topic_alias_maximum = p.u16()?;
                    }
                    0x1f => {
                        once(&mut seen, id)?;
                        c.reason_string = p.string()?;
                    }
                    0x28 => {
                        once(&mut seen, id)?;
                        c.wildcard_subscription_available = bool_prop(p.u8()?)?;
                    }
                    0x29 => {
                        once(&mut seen, id)?;
                        c.subscription_identifiers_available = bool_prop(p.u8()?)?;
                    }
                    0x2a => {
                        once(&mut seen, id)?;
                        c.shared_subscription_available = bool_prop(p.u8()?)?;
                    }
                    0x13 => {
                        once(&mut seen, id)?;
                        c.server_keepalive = p.u16()?;
                    }
                    0x1a => {
                        once(&mut seen, id)?;
                        c.response_information = p.string()?;
                    }
                    0x1c => {
                        once(&mut seen, id)?;
                        c.server_reference = p.string()?;
                    }
                    0x26 => {
                        p.string()?;
                        p.string()?;
                    }
                    0x15 => {
                        once(&mut seen, id)?;
                        c.authentication_method = p.string()?;
                    }
                    0x16 => {
                        once(&mut seen, id)?;
                        c.authentication_data = p.string()?;
                    }
                    _ => return None,
                }
                Some(())
            })();
            if known.is_none() {
                return Err(if is_connack_property(id) {
                    Stop::Invalid
                } else {
                    Stop::NeedMore
                });
            }
        }
    }
    if start - r.0.len() == remaining as usize {
        Ok(c)
    } else {
        Err(Stop::Invalid)
    }
}

/// The property identifiers a CONNACK may carry.
fn is_connack_property(id: u8) -> bool {
    matches!(
        id,
        0x11 | 0x21
            | 0x24
            | 0x25
            | 0x27
            | 0x12
            | 0x22
            | 0x1f
            | 0x28
            | 0x29
            | 0x2a
            | 0x13
            | 0x1a
            | 0x1c
            | 0x26
            | 0x15
            | 0x16
    )
}

/// The packet at the start of `msg`: its fixed header, then CONNECT or CONNACK.
fn parse(msg: &[u8]) -> Result<Packet<'_>, Stop> {
    if msg.len() < 2 {
        return Err(Stop::NeedMore);
    }
    let packet = msg[0] >> 4;
    if packet == 0 || msg[0] & 0x0f != expected_flags(packet) {
        return Err(Stop::Invalid);
    }
    let mut r = Reader(&msg[1..]);
    let remaining = r.varint().ok_or(Stop::Invalid)?;
    if (r.0.len() as u64) < u64::from(remaining) {
        return Err(Stop::NeedMore);
    }
    match packet {
        CONNECT => parse_connect(r, remaining)
            .map(|c| Packet::Connect(Box::new(c)))
            .ok_or(Stop::Invalid),
        CONNACK => parse_connack(r, remaining).map(|c| Packet::Connack(Box::new(c))),
        _ => Err(Stop::Invalid),
    }
}

/// `mqtt_is_valid`.
pub fn validate(msg: &[u8]) -> Validity {
    match parse(msg) {
        Ok(_) => Validity::Valid,
        Err(Stop::Invalid) => Validity::Invalid,
        Err(Stop::NeedMore) => Validity::NeedMore,
    }
}

/// `mqtt_field_value(packet, field)`: the field of a valid packet of that type. Properties
/// are MQTT 5.0 only, will properties need the will flag; an empty string is not a value.
pub fn field_value(msg: &[u8], packet: u8, field: Field) -> FieldValue<'_> {
    use Field as F;
    use FieldValue::{Bytes, Int, NotFound};
    let p = match parse(msg) {
        Ok(p) => p,
        Err(Stop::NeedMore) => return FieldValue::NeedMore,
        Err(Stop::Invalid) => return NotFound,
    };
    let v = match p {
        Packet::Connect(c) if packet == CONNECT => {
            let v5 = c.protocol_version == V5_0;
            let will = v5 && c.flags & FL_WILL != 0;
            match field {
                F::Flags => Int(c.flags.into()),
                F::ProtocolName => Bytes(c.protocol_name),
                F::ProtocolVersion => Int(c.protocol_version.into()),
                F::ClientIdentifier => Bytes(c.client_identifier),
                F::WillTopic => Bytes(c.will_topic),
                F::WillPayload => Bytes(c.will_payload),
                F::Username => Bytes(c.username),
                F::Password => Bytes(c.password),
                F::Keepalive => Int(c.keepalive.into()),
                F::PayloadFormatIndicator if will => Int(c.payload_format_indicator.into()),
                F::MessageExpiryInterval if will => Int(c.message_expiry_interval),
                F::ContentType if will => Bytes(c.content_type),
                F::ResponseTopic if will => Bytes(c.response_topic),
                F::CorrelationData if will => Bytes(c.correlation_data),
                F::DelayInterval if will => Int(c.delay_interval),
                F::SessionExpiryInterval if v5 => Int(c.session_expiry_interval),
                F::AuthenticationMethod if v5 => Bytes(c.authentication_method),
                F::AuthenticationData if v5 => Bytes(c.authentication_data),
                F::RequestProblemInformation if v5 => Int(c.request_problem_information.into()),
                F::RequestResponseInformation if v5 => Int(c.request_response_information.into()),
                F::ReceiveMaximum if v5 => Int(c.receive_maximum.into()),
                F::TopicAliasMaximum if v5 => Int(c.topic_alias_maximum.into()),
                F::MaximumPacketSize if v5 => Int(c.maximum_packet_size),
                _ => NotFound,
            }
        }
        Packet::Connack(c) if packet == CONNACK => {
            let v5 = c.protocol_version == V5_0;
            match field {
                F::Flags => Int(c.flags.into()),
                F::ReasonCode => Int(c.reason_code.into()),
                F::ProtocolVersion => Int(c.protocol_version.into()),
                F::SessionExpiryInterval if v5 => Int(c.session_expiry_interval),
                F::AssignedClientIdentifier if v5 => Bytes(c.assigned_client_identifier),
                F::ServerKeepalive if v5 => Int(c.server_keepalive.into()),
                F::AuthenticationMethod if v5 => Bytes(c.authentication_method),
                F::AuthenticationData if v5 => Bytes(c.authentication_data),
                F::ResponseInformation if v5 => Bytes(c.response_information),
                F::ServerReference if v5 => Bytes(c.server_reference),
                F::ReasonString if v5 => Bytes(c.reason_string),
                F::ReceiveMaximum if v5 => Int(c.receive_maximum.into()),
                F::TopicAliasMaximum if v5 => Int(c.topic_alias_maximum.into()),
                F::MaximumQos if v5 => Int(c.maximum_qos.into()),
                F::RetainAvailable if v5 => Int(c.retain_available.into()),
                F::MaximumPacketSize if v5 => Int(c.maximum_packet_size),
                F::WildcardSubscriptionAvailable if v5 => {
                    Int(c.wildcard_subscription_available.into())
                }
                F::SubscriptionIdentifiersAvailable if v5 => {
                    Int(c.subscription_identifiers_available.into())
                }
                F::SharedSubscriptionAvailable if v5 => Int(c.shared_subscription_available.into()),
                _ => NotFound,
            }
        }
        _ => NotFound,
    };
    match v {
        Bytes([]) => NotFound,
        v => v,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// MQTT 3.1.1 CONNECT: client "test_sub", user "test", password "passwd", will topic
    /// "willtopic", will message "willpayload" (flags 0xee: will QoS 1, retain).
    const V311_WILL: &str = "103a00044d51545404ee003c0008746573745f737562000977696c6c746f706963\
        000b77696c6c7061796c6f61640004746573740006706173737764";

    /// MQTT 5.0 CONNECT with connect properties (maximum packet size 20, request problem
    /// information 1, two user properties) and will properties (content type "text/plain",
    /// response topic "willrsptopic", two user properties).
    const V5_COMPLEX: &str = "107e00044d51545405ee003c1827000000141701260001610001622600016300\
        01642100140008746573745f7375622a03000a746578742f706c61696e08000c77696c6c727370746f7069\
        632600016500016626000167000168000977696c6c746f706963000b77696c6c7061796c6f616400047465\
        73740006706173737764";

    /// MQTT 5.0 CONNACK: session expiry 120, receive maximum 32767, maximum QoS 1, retain
    /// available, maximum packet size 65535, topic alias maximum 10, two user properties.
    const V5_CONNACK: &str = "20250000221100000078217fff24012501270000ffff22000a260001610001622600\
        0163000164";

    fn value(msg: &str, packet: &str, name: &str) -> Option<String> {
        let t = packet_type(packet).unwrap();
        let f = field(t, name).unwrap();
        match field_value(&hex(msg), t, f) {
            FieldValue::Bytes(b) => Some(String::from_utf8(b.to_vec()).unwrap()),
            FieldValue::Int(i) => Some(i.to_string()),
            FieldValue::NotFound => None,
            FieldValue::NeedMore => Some("<more>".into()),
        }
    }

    #[test]
    fn valid_connect_and_connack_packets() {
        for p in [
            V311_WILL,
            V5_COMPLEX,
            V5_CONNACK,
            // 3.1.1, empty client id, user and password.
            "101a00044d51545404c2003c00000004746573740006706173737764",
            // 5.0 with a maximum packet size property.
            "101800044d5154540502003c032100140008746573745f737562",
            // MQTT 3.1 ("MQIsdp").
            "102400064d514973647003c200000008746573745f7375620004746573740006706173737764",
            // 3.1.1 CONNACK.
            "20020000",
        ] {
            assert_eq!(validate(&hex(p)), Validity::Valid, "{p}");
        }
    }

    #[test]
    fn invalid_packets() {
        for p in [
            // PINGREQ: a type that is not parsed.
            "d000",
            // CONNECT with flags in the fixed header.
            "111400044d5154540402003c0008746573745f737562",
            // A remaining length of more than four bytes.
            "10ffffffff1400044d5154540402003c0008746573745f737562",
            // The packet is longer than its remaining length says.
            "101800044d5154540402003c0008746573745f737562ffffffff",
            // CONNACK with reserved flag bits.
            "21020000",
            "20020200",
            // Reserved CONNECT flag.
            "100c00044d5154540403003c0000",
            // Will QoS without the will flag.
            "100c00044d5154540418003c0000",
            // Unknown protocol name and version.
            "100c00044d5154580402003c0000",
            "100c00044d5154540602003c0000",
            // 5.0 receive maximum 0.
            "101000044d5154540502003c032100000000",
            // 5.0 duplicate session expiry interval.
            "101700044d5154540502003c0a110000000111000000010000",
        ] {
            assert_eq!(validate(&hex(p)), Validity::Invalid, "{p}");
        }
    }

    #[test]
    fn incomplete_packets_need_more_data() {
        let full = hex(V5_COMPLEX);
        for n in [0, 1, 2, 50, full.len() - 1] {
            assert_eq!(validate(&full[..n]), Validity::NeedMore, "{n} bytes");
        }
        // The remaining length itself cut short.
        assert_eq!(validate(&hex("10ff")), Validity::NeedMore);
        // An unknown CONNACK property is "need more data" in haproxy.
        assert_eq!(validate(&hex("2005000002ff00")), Validity::NeedMore);
        assert_eq!(
            value(&V5_COMPLEX[..40], "connect", "client_identifier").as_deref(),
            Some("<more>")
        );
    }

    #[test]
    fn connect_fields() {
        let v = |name| value(V5_COMPLEX, "connect", name);
        assert_eq!(v("protocol_name").as_deref(), Some("MQTT"));
        assert_eq!(v("protocol_version").as_deref(), Some("5"));
        assert_eq!(v("flags").as_deref(), Some("238"));
        assert_eq!(v("keepalive").as_deref(), Some("60"));
        assert_eq!(v("client_identifier").as_deref(), Some("test_sub"));
        assert_eq!(v("will_topic").as_deref(), Some("willtopic"));
        assert_eq!(v("will_payload").as_deref(), Some("willpayload"));
        assert_eq!(v("USERNAME").as_deref(), Some("test"));
        assert_eq!(v("password").as_deref(), Some("passwd"));
        assert_eq!(v("39").as_deref(), Some("20"));
        assert_eq!(v("23").as_deref(), Some("1"));
        assert_eq!(v("3").as_deref(), Some("text/plain"));
        assert_eq!(v("8").as_deref(), Some("willrsptopic"));
        // Absent properties read as zero, absent strings as no value.
        assert_eq!(v("17").as_deref(), Some("0"));
        assert_eq!(v("21"), None);
        // Properties are MQTT 5.0 only.
        assert_eq!(value(V311_WILL, "1", "39"), None);
        assert_eq!(
            value(V311_WILL, "1", "will_topic").as_deref(),
            Some("willtopic")
        );
        // An empty client identifier is no value.
        let empty_id = "101a00044d51545404c2003c00000004746573740006706173737764";
        assert_eq!(value(empty_id, "connect", "client_identifier"), None);
        // Another packet type than the one asked for.
        assert_eq!(value(V5_CONNACK, "connect", "flags"), None);
    }

    #[test]
    fn connack_fields() {
        let v = |name| value(V5_CONNACK, "connack", name);
        assert_eq!(v("protocol_version").as_deref(), Some("5"));
        assert_eq!(v("flags").as_deref(), Some("0"));
        assert_eq!(v("reason_code").as_deref(), Some("0"));
        assert_eq!(v("17").as_deref(), Some("120"));
        assert_eq!(v("33").as_deref(), Some("32767"));
        assert_eq!(v("36").as_deref(), Some("1"));
        assert_eq!(v("37").as_deref(), Some("1"));
        assert_eq!(v("39").as_deref(), Some("65535"));
        assert_eq!(v("34").as_deref(), Some("10"));
        assert_eq!(value("20020105", "2", "reason_code").as_deref(), Some("5"));
        assert_eq!(
            value("20020105", "2", "protocol_version").as_deref(),
            Some("4")
        );
        assert_eq!(value("20020105", "2", "17"), None);
    }

    #[test]
    fn names_checked_at_load() {
        assert_eq!(packet_type("connect"), Some(CONNECT));
        assert_eq!(packet_type("ConnAck"), Some(CONNACK));
        assert_eq!(packet_type("15"), Some(15));
        assert_eq!(packet_type("auth"), Some(15));
        // haproxy reads the number without checking digits: ":" is 10.
        assert_eq!(packet_type(":"), Some(10));
        assert_eq!(packet_type("0"), None);
        assert_eq!(packet_type("16"), None);
        assert_eq!(packet_type("connected"), None);
        assert_eq!(field(CONNECT, "Will_Topic"), Some(Field::WillTopic));
        assert_eq!(field(CONNECT, "24"), Some(Field::DelayInterval));
        // Property 18 is CONNACK's assigned client identifier, not a CONNECT field.
        assert_eq!(field(CONNECT, "18"), None);
        assert_eq!(field(CONNECT, "reason_code"), None);
        assert_eq!(field(CONNACK, "keepalive"), None);
        assert_eq!(field(CONNACK, ""), None);
        assert_eq!(field(PUBLISH, "35"), Some(Field::TopicAlias));
        assert_eq!(field(12, "flags"), None);
    }
}
