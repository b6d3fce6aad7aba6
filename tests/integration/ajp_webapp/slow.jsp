<%@ page contentType="text/plain" session="false" trimDirectiveWhitespaces="true" %>
<% Thread.sleep(4); %>
slow page: 4 ms
